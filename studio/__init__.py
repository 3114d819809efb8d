"""The studio: leased, idempotent model proposals about a person's own invoices."""
