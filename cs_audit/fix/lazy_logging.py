"""The eager-format fix for log calls: a message built before the level check (an f-string,
``.format``, ``%`` or ``+``) becomes a %-style template with lazy arguments, so logging
formats it only for a record that passes.

``lazy_call`` returns the new call, or a ``Decline`` saying why the message is left alone:
only conversions whose output ``LogRecord.getMessage()`` gives back character for character
are made (the property test in ``tests/test_fix_lazy_property.py`` holds it to that).
"""

from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Decline:
    reason: str


#: format-spec mini-language: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(
    r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?"
    r"(?P<grouping>[,_])?(?:\.(?P<prec>\d+))?(?P<type>[bcdeEfFgGnosxX%])?",
    re.DOTALL,
)
_NUMERIC = set("deEfFgGxXo")
#: builtins whose result is never a tuple: safe as the single right operand of ``%``
_NOT_TUPLE_CALLS = {"str", "repr", "int", "float", "len", "round", "hex", "oct", "bool", "type", "id", "ascii"}


def percent_spec(spec: str, conversion: str | None) -> str | Decline:
    """The %-directive that formats a value as ``format(conv(value), spec)`` does, or a Decline
    for a spec with no %-form (or whose output would depend on the value's runtime type)."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        return Decline(f"format spec `{spec}` is not a plain one")
    fill, align, sign, z, alt, zero, width, grouping, prec, kind = m.group(
        "fill", "align", "sign", "z", "alt", "zero", "width", "grouping", "prec", "type")
    if grouping or z:
        return Decline(f"format spec `{spec}` groups digits or uses `z`: %-formatting has no such flag")
    if fill not in (None, " ") or align in ("^", "="):
        return Decline(f"format spec `{spec}` centres, pads with `{fill or ''}` or aligns after the sign: no %-form")
    if conversion:
        if kind not in (None, "s"):
            return Decline(f"format spec `{spec}` gives a numeric type to a `!{conversion}` string")
        letter = conversion
    else:
        letter = kind
    if kind in (None, "s"):
        if sign or alt or zero:
            return Decline(f"format spec `{spec}` has a numeric flag without a numeric type")
        if kind is None and not conversion and (prec is not None or (width and align is None)):
            # `{x:10}` left-aligns a str and right-aligns a number: the value's type decides
            return Decline(f"format spec `{spec}` aligns or rounds by the value's type: give a type or an alignment")
        flags = "-" if width and (align == "<" or (align is None and (kind == "s" or conversion))) else ""
        return f"%{flags}{width or ''}{'.' + prec if prec is not None else ''}{letter or 's'}"
    if kind not in _NUMERIC:
        return Decline(f"format type `{kind}` has no %-form")
    if kind == "d" and prec is not None:
        return Decline(f"format spec `{spec}` gives an integer a precision")
    if zero and align is not None:
        return Decline(f"format spec `{spec}` zero-pads with an alignment")
    flags = ("-" if align == "<" and width else "") + (sign if sign in ("+", " ") else "") + ("#" if alt else "") + \
        ("0" if zero and width else "")
    return f"%{flags}{width or ''}{'.' + prec if prec is not None else ''}{kind}"


# ---------------------------------------------------------------------------- pieces
@dataclass
class _Part:
    """One literal of the message as written: its prefix and quotes and a body made of text
    (source text of the literal, escaped later) and directives."""

    prefix: str
    quote: str
    body: list[tuple[str, str]]  # ("text", source) | ("spec", directive)
    lpar: tuple = ()
    rpar: tuple = ()


class _Message:
    def __init__(self) -> None:
        self.parts: list[_Part] = []
        self.args: list[cst.BaseExpression] = []


def _simple_part(node: cst.SimpleString) -> _Part | Decline:
    prefix = node.prefix
    if "b" in prefix.lower():
        return Decline("a bytes message")
    quote = node.quote
    return _Part(prefix, quote, [("text", node.value[len(prefix) + len(quote):-len(quote)])])


def _fstring_part(node: cst.FormattedString, msg: _Message) -> _Part | Decline:
    prefix = node.prefix.replace("f", "").replace("F", "")
    quote = node.start[len(node.prefix):]
    body: list[tuple[str, str]] = []
    for piece in node.parts:
        if isinstance(piece, cst.FormattedStringText):
            body.append(("text", piece.value.replace("{{", "{").replace("}}", "}")))
            continue
        assert isinstance(piece, cst.FormattedStringExpression)
        spec = ""
        for s in piece.format_spec or ():
            if not isinstance(s, cst.FormattedStringText):
                return Decline("a nested field in a format spec (`{x:>{w}}`)")
            spec += s.value
        conversion = piece.conversion
        if piece.equal is not None:
            # `{x=}` writes its own source text, then repr(x) (or the conversion or spec given)
            code = cst.Module([]).code_for_node
            text = (code(piece.whitespace_before_expression) + code(piece.expression) + code(piece.whitespace_after_expression)
                    + code(piece.equal.whitespace_before) + "=" + code(piece.equal.whitespace_after))
            if "\\" in text or "\n" in text or quote[0] in text:
                return Decline("an `=` field whose expression holds the string's quote, a backslash or a newline")
            body.append(("text", text))
            if conversion is None and not spec:
                conversion = "r"
        directive = percent_spec(spec, conversion)
        if isinstance(directive, Decline):
            return directive
        body.append(("spec", directive))
        msg.args.append(_as_argument(piece.expression))
    return _Part(prefix, quote, body)


def _as_argument(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The expression as a call argument: a bare tuple (`{a, b}`) keeps its parentheses."""
    if isinstance(expr, cst.Tuple) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if isinstance(expr, (cst.Yield, cst.NamedExpr)) and not getattr(expr, "lpar", None):
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def _literal_parts(node: cst.BaseExpression, msg: _Message) -> Decline | None:
    """Add the adjacent literals of ``node`` (strings and f-strings) to ``msg``."""
    if isinstance(node, cst.ConcatenatedString):
        if node.lpar:
            return Decline("a parenthesised part in the concatenation")
        return _literal_parts(node.left, msg) or _literal_parts(node.right, msg)
    if isinstance(node, cst.SimpleString):
        part = _simple_part(node)
    elif isinstance(node, cst.FormattedString):
        part = _fstring_part(node, msg)
    else:
        return Decline("not a string literal")
    if isinstance(part, Decline):
        return part
    msg.parts.append(part)
    return None


def _render(msg: _Message) -> list[cst.SimpleString]:
    """The template as literals laid out as the message was (one literal per literal written)."""
    escape = bool(msg.args)  # logging applies `%` only when there are arguments
    nodes: list[cst.SimpleString] = []
    for part in msg.parts:
        text = "".join(
            (v.replace("%", "%%") if escape else v) if kind == "text" else v for kind, v in part.body)
        nodes.append(cst.SimpleString(f"{part.prefix}{part.quote}{text}{part.quote}"))
    return nodes


# ---------------------------------------------------------------------------- messages
def _from_literals(value: cst.BaseExpression) -> _Message | Decline:
    msg = _Message()
    bad = _literal_parts(value, msg)
    return bad or msg


def _string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = ast.literal_eval(cst.Module([]).code_for_node(node.with_changes(lpar=(), rpar=())))
        except (ValueError, SyntaxError):
            return None
        return value if isinstance(value, str) else None
    return None


def _pure(expr: cst.BaseExpression) -> bool:
    """A name, a literal or an attribute of a name: evaluating it twice, or in another order, is harmless."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    return isinstance(expr, cst.Attribute) and _pure(expr.value)


def _from_format(call: cst.Call) -> _Message | Decline:
    """`"a {} {x:.2f}".format(y, x=z)` -> `"a %s %.2f"`, y, z."""
    template = _string_value(call.func.value)  # type: ignore[attr-defined]
    if template is None:
        return Decline("`.format` of a string that is not a plain literal")
    positional: list[cst.BaseExpression] = []
    named: dict[str, cst.BaseExpression] = {}
    for arg in call.args:
        if arg.star:
            return Decline("`.format(*args)` or `**kwargs`")
        if arg.keyword is not None:
            named[arg.keyword.value] = arg.value
        else:
            positional.append(arg.value)
    msg = _Message()
    text: list[tuple[str, str]] = []
    used: list[tuple[str | int, cst.BaseExpression]] = []
    auto = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        return Decline(f"`.format` template does not parse: {exc}")
    for literal, field, spec, conversion in fields:
        if literal:
            text.append(("text", literal))
        if field is None:
            continue
        if "{" in (spec or ""):
            return Decline("a nested field in a format spec")
        if field == "":
            key: str | int = auto
            auto += 1
        elif field.isdigit():
            key = int(field)
        elif field.isidentifier():
            key = field
        else:
            return Decline(f"a field with an attribute or index (`{{{field}}}`)")
        value = positional[key] if isinstance(key, int) and key < len(positional) else named.get(key) if isinstance(key, str) else None
        if value is None:
            return Decline(f"`.format` field `{field or key}` has no argument")
        directive = percent_spec(spec or "", conversion)
        if isinstance(directive, Decline):
            return directive
        text.append(("spec", directive))
        used.append((key, value))
    given = [(i, v) for i, v in enumerate(positional)] + list(named.items())
    keys = [k for k, _ in used]
    order_kept = keys == [k for k, _ in given if k in keys] and len(set(keys)) == len(keys)
    if not all(_pure(v) for k, v in given if keys.count(k) != 1) or not (order_kept or all(_pure(v) for _, v in used)):
        return Decline("`.format` arguments used twice, unused or out of order, with side effects possible")
    msg.args = [_as_argument(v) for _, v in used]
    quote = '"' if '"' not in template or "'" in template else "'"
    # the template is rebuilt from its value: one literal, its escapes written anew
    body = [(kind, _escape_source(v, quote) if kind == "text" else v) for kind, v in text]
    msg.parts = [_Part("", quote, body)]
    return msg


def _escape_source(value: str, quote: str) -> str:
    out = repr(value)[1:-1]
    if repr(value)[0] != quote:  # repr chose the other quote: undo its escaping of ours, escape ours
        out = out.replace("\\" + repr(value)[0], repr(value)[0]).replace(quote, "\\" + quote)
    return out


def _from_percent(op: cst.BinaryOperation) -> _Message | Decline:
    """`"a %s %d" % (x, y)` -> `"a %s %d"`, x, y (the template is kept as written)."""
    if not isinstance(op.left, (cst.SimpleString, cst.ConcatenatedString)) or _string_value(op.left) is None:
        return Decline("`%` on a template that is not a plain literal")
    right = op.right
    if isinstance(right, cst.Tuple):
        if not right.elements or any(isinstance(e, cst.StarredElement) for e in right.elements):
            return Decline("`%` with an empty or starred tuple")
        args = [e.value for e in right.elements]
    elif isinstance(right, cst.Dict) and right.elements:
        args = [right]  # a non-empty mapping: logging applies it as `%` would
    elif isinstance(right, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) or (
        isinstance(right, cst.Call) and isinstance(right.func, cst.Name) and right.func.value in _NOT_TUPLE_CALLS
    ):
        args = [right]
    else:
        return Decline("`%` with a right operand that may be a tuple at run time")
    msg = _Message()
    bad = _literal_parts(op.left.with_changes(lpar=(), rpar=()), msg)
    if bad:
        return bad
    # the template already is %-style: its text is not escaped again
    msg.parts = [_Part(p.prefix, p.quote, [("spec", v) for _, v in p.body]) for p in msg.parts]
    msg.args = [_as_argument(a) for a in args]
    return msg


def _from_concat(op: cst.BinaryOperation) -> _Message | Decline:
    """`"a " + str(x) + f" b {y}"` -> `"a %s b %s"`, x, y (only the left spine is flattened:
    a parenthesised right operand is one value)."""
    operands: list[cst.BaseExpression] = []
    node: cst.BaseExpression = op
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) and not node.lpar:
        operands.insert(0, node.right)
        node = node.left
    operands.insert(0, node)
    if not any(isinstance(o, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) for o in operands):
        return Decline("`+` without a string literal")
    msg = _Message()
    for operand in operands:
        if isinstance(operand, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) and not operand.lpar:
            bad = _literal_parts(operand, msg)
            if bad:
                return bad
            continue
        directive = "%s"
        value = operand
        if isinstance(operand, cst.Call) and isinstance(operand.func, cst.Name) and operand.func.value in ("str", "repr") \
                and len(operand.args) == 1 and not operand.args[0].star and operand.args[0].keyword is None:
            directive = "%s" if operand.func.value == "str" else "%r"
            value = operand.args[0].value
        if not msg.parts:
            msg.parts.append(_Part("", '"', []))
        msg.parts[-1].body.append(("spec", directive))
        msg.args.append(_as_argument(value))
    return msg


def lazy_message(value: cst.BaseExpression) -> _Message | Decline:
    if isinstance(value, (cst.FormattedString, cst.ConcatenatedString)):
        if value.lpar and isinstance(value, cst.ConcatenatedString):
            value = value.with_changes(lpar=(), rpar=())
        return _from_literals(value)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "format":
        return _from_format(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo):
        return _from_percent(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        return _from_concat(value)
    return Decline("the message is not built by an f-string, `.format`, `%` or `+`")


def lazy_call(call: cst.Call, msg_index: int) -> cst.Call | Decline:
    """``call`` with its message at ``msg_index`` made lazy, or why not."""
    args = list(call.args)
    if any(a.star for a in args):
        return Decline("the call passes `*args` or `**kwargs`")
    positional = [a for a in args if a.keyword is None]
    if len(positional) <= msg_index:
        return Decline("the message is not a positional argument")
    msg_arg = positional[msg_index]
    if isinstance(msg_arg.value, cst.SimpleString) or (
            isinstance(msg_arg.value, cst.ConcatenatedString) and _string_value(msg_arg.value) is not None):
        return Decline("the message is lazy already; the eager work is in an argument (`json.dumps`, `repr`...), "
                       "which has no lazy form without a wrapper")
    if len(positional) > msg_index + 1:
        return Decline("the call already passes %-arguments after the message")
    built = lazy_message(msg_arg.value)
    if isinstance(built, Decline):
        return built
    nodes = _render(built)
    if not nodes:
        return Decline("an empty message")
    if len(nodes) == 1:
        template: cst.BaseExpression = nodes[0]
    else:
        template = nodes[-1]
        for left in reversed(nodes[:-1]):
            template = cst.ConcatenatedString(left=left, right=template, whitespace_between=cst.SimpleWhitespace(" "))
        template = _keep_layout(msg_arg.value, template)
    if isinstance(msg_arg.value, (cst.FormattedString, cst.ConcatenatedString, cst.SimpleString)) and msg_arg.value.lpar:
        template = template.with_changes(lpar=msg_arg.value.lpar, rpar=msg_arg.value.rpar)
    if not built.args:
        return call.with_changes(args=[a.with_changes(value=template) if a is msg_arg else a for a in args])
    multiline = isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace)
    sep: cst.BaseParenthesizableWhitespace = call.whitespace_before_args if multiline else cst.SimpleWhitespace(" ")
    new_args: list[cst.Arg] = []
    for a in args:
        if a is not msg_arg:
            new_args.append(a)
            continue
        new_args.append(a.with_changes(value=template, comma=cst.Comma(whitespace_after=sep),
                                       whitespace_after_arg=cst.SimpleWhitespace("")))
        for i, value in enumerate(built.args):
            last = i == len(built.args) - 1
            new_args.append(cst.Arg(
                value=value,
                comma=a.comma if last else cst.Comma(whitespace_after=sep),
                whitespace_after_arg=a.whitespace_after_arg if last else cst.SimpleWhitespace(""),
            ))
    return call.with_changes(args=new_args)


def _keep_layout(original: cst.BaseExpression, template: cst.BaseExpression) -> cst.BaseExpression:
    """Put the whitespace between the original adjacent literals back between the new ones."""
    gaps: list[cst.BaseParenthesizableWhitespace] = []

    def collect(node: cst.BaseExpression) -> None:
        if isinstance(node, cst.ConcatenatedString):
            collect(node.left)
            gaps.append(node.whitespace_between)
            collect(node.right)

    collect(original.with_changes(lpar=()) if isinstance(original, cst.ConcatenatedString) else original)
    pieces: list[cst.SimpleString] = []

    def flatten(node: cst.BaseExpression) -> None:
        if isinstance(node, cst.ConcatenatedString):
            flatten(node.left)
            flatten(node.right)
        else:
            pieces.append(node)  # type: ignore[arg-type]

    flatten(template)
    if len(gaps) != len(pieces) - 1:
        return template
    out: cst.SimpleString | cst.ConcatenatedString = pieces[-1]
    for left, gap in zip(reversed(pieces[:-1]), reversed(gaps)):
        out = cst.ConcatenatedString(left=left, right=out, whitespace_between=gap)
    return out
