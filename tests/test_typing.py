"""What the type checker (``.ci/run``'s mypy) reads agrees with what runs."""

import ast
import dataclasses
import inspect

from cs_audit import model


def test_a_plain_call_declares_each_call_site_field_it_holds_with_the_call_sites_type() -> None:
    # PlainCall's fields are properties set in a loop, which mypy cannot follow: the class
    # declares them for it, and the declarations must stay those of CallSite's fields
    source = ast.parse(inspect.getsource(model.PlainCall)).body[0]
    assert isinstance(source, ast.ClassDef)
    block = next(s for s in source.body if isinstance(s, ast.If) and ast.unparse(s.test) == "TYPE_CHECKING")
    declared = {s.target.id: ast.unparse(s.annotation) for s in block.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    call_site = {f.name: str(f.type) for f in dataclasses.fields(model.CallSite)}
    assert declared == {name: call_site[name] for name in model.PLAIN_FIELDS}
    assert all(isinstance(getattr(model.PlainCall, name), property) for name in declared)
