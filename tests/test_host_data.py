"""Host data the whole tree shows (#19, "Syncs"): a helper's parameter every caller passes host
data in, names the code gives host data by, and a package that never touches a device.
There `.cpu()`/`.item()`/`.tolist()` copy no device memory: no `sync-in-debug`, `gpu_sync`
false.  Each case has its near miss, which stays a sync."""

from __future__ import annotations

from cs_audit.testing import check_annotations, scan_files

HEAD = '''
import logging
import os

import torch

logger = logging.getLogger(__name__)
DEBUG = os.getenv("TOY_DEBUG", "0") == "1"
'''


# ------------------------------------------------------------------ parameters
PARAMETERS = '''
def format_map(table):
    # called with a host copy only: `.cpu()` and `.tolist()` copy nothing from a device
    # ok: sync-in-debug
    table = table.cpu()
    return ", ".join(str(row) for row in table.tolist())


def format_layout(meta):
    return format_map(meta.map_cpu)


def format_rows(rows):
    # one caller hands a device tensor: a sync, reported at the debug record that pays it
    # (this function is called outside debug code too)
    # ok: sync-in-debug
    return str(rows.tolist())


def format_kept(kept):
    # every caller passes a host copy, but it rebinds the parameter first
    kept = kept + 1
    # expect: sync-in-debug
    return str(kept.tolist())


def format_other(table):
    # its resolved caller passes a host copy, but a call of its name resolves to nothing
    # expect: sync-in-debug
    return str(table.tolist())


def format_grid(grid):
    # one caller makes it host data in one branch and passes it as it came in the other
    # expect: sync-in-debug
    return str(grid.cpu())


def format_item(row):
    # one caller passes a loop's item, no longer the host copy of the same name
    # expect: sync-in-debug
    return str(row.cpu())


class Runner:
    def execute_model(self, meta, t, ids, other, grid):
        if DEBUG:
            if isinstance(grid, list):
                grid = torch.tensor(grid)
            # expect: sync-in-debug
            logger.info("grid %s", format_grid(grid))
            # expect: sync-in-debug
            row = t.cpu()
            for row in self.device_rows:
                # expect: sync-in-debug
                logger.info("row %s", format_item(row))
            # expect: sync-in-debug
            logger.info("other %s", format_other(meta.map_cpu))
            other.format_other(meta.map)
            logger.info("layout %s", format_layout(meta))
            logger.info("table %s", format_map(torch.tensor(ids)))
            # expect: sync-in-debug
            logger.info("rows %s", format_rows(t))
            # expect: sync-in-debug
            logger.info("kept %s", format_kept(self.rows_cpu))
        self.rows = format_rows(self.rows_cpu)
        if DEBUG:
            # named for host data: `seq_lens_cpu`
            # ok: sync-in-debug
            logger.info("lens %s", self.seq_lens_cpu.tolist())
            # expect: sync-in-debug
            logger.info("lens %s", self.seq_lens.tolist())
'''


#: a file that names a device: no package rule applies (and a loose file is in no package)
DEVICE_HEAD = HEAD + 'DEVICE = torch.device("cuda")\n'


def test_a_parameter_every_caller_passes_host_data_in_holds_host_data() -> None:
    assert check_annotations({"engine/runner.py": DEVICE_HEAD + PARAMETERS}) == []


# ------------------------------------------------------------------ packages
RUNNER = '''
class Runner:
    def execute_model(self, t):
        self.side = "{verdict}"
        if DEBUG:
            # {verdict}: sync-in-debug
            logger.info("sum %s", t.sum().item())
        return summarize(t)
'''

STATS = HEAD + '''
def summarize(t):
    t = t + len("{verdict}")
    if DEBUG:
        # {verdict}: sync-in-debug
        logger.info("max %s", t.max().item())
    return t
'''


def test_only_a_package_that_never_touches_a_device_and_no_outside_module_imports_holds_host_data() -> None:
    files = {
        # a device API named: its syncs are syncs
        "gpuside/__init__.py": "",
        "gpuside/runner.py": HEAD + "from statsonly.stats import summarize\n" + RUNNER.format(verdict="expect")
        + "\n\ndef to_device(t):\n    return t.cuda()\n",
        # no device API, but the GPU side imports it: its tensors may be on a device
        "statsonly/__init__.py": "",
        "statsonly/stats.py": STATS.format(verdict="expect"),
        # no device API and imported by nothing outside it: host data only
        "cpuside/__init__.py": "",
        "cpuside/runner.py": HEAD + "from cpuside.stats import summarize\n" + RUNNER.format(verdict="ok"),
        "cpuside/stats.py": STATS.format(verdict="ok"),
    }
    # a device named in a string, a comment, or a move to a device held in a name
    for n, device_line in enumerate(('x = torch.zeros(4, device="cuda:0")', "# the streams are torch.cuda ones",
                                     "def move(t, device):\n    return t.to(device)")):
        files[f"named{n}/__init__.py"] = ""
        files[f"named{n}/runner.py"] = HEAD + device_line + "\n" + RUNNER.replace("return summarize(t)", f"return {n}").format(
            verdict="expect")
    assert check_annotations(files) == []
    result = scan_files(files)
    emitted = {f.path: f.gpu_sync for f in result.findings if f.rule == "default-on-emitter"}
    assert emitted == {}, emitted  # the records are behind DEBUG: no default-on finding to carry gpu_sync
