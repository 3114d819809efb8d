"""The model's work, leased to the person who asked: the request made once (intents), the lease
and its tasks, the purposes a model may be asked for, the providers that answer and the
receipt readers they use."""
