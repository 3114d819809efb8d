"""Handlers by resource, over the negotiation and body parsing in `studio.web.negotiation`."""
