"""The driver side: the runtime, the handles a user holds, streams and the portal."""
