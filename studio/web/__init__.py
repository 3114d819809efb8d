"""The thin web floor: the edge layer, negotiation and body parsing, health and metrics, and
the handlers by resource (views/)."""
