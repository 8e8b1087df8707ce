"""Renderers: an ``AuditResult`` (and, for SARIF, GitHub and check reports, a
``ReportContext``) in, text out.  No file is read and no git is run here."""
