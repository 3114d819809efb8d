"""Who is signed in: argon2 passwords, server-side sessions in a signed cookie, and the
sign-in throttle."""
