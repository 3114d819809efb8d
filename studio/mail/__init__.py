"""Email: the SMTP conversation, and the outbox an email waits in until it is sent."""
