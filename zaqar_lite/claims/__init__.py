"""The message policy (claims, dead letters, delays, expiry) and the service applying it."""
