"""What an operator runs: the command line, accounts, backup, checks, the audit, the demo and
the import of drafts."""
