"""Join a real run to the audit: ``trace`` records the calls of a run (``recorder``), the
readers of ``profiles`` turn any supported profile into calls or samples per frame, and
``join`` maps frames to the scanned tree's functions and gives each finding its observed
status.  The recorder imports nothing but the standard library: it runs in the program's
own interpreter, which need not have cs-audit installed."""
