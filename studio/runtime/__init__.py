"""What runs beside the web: the worker that claims tasks and sends email, and the sweeper."""
