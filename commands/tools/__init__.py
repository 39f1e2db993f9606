"""`demo` and `bench`: the scripted session and the machine's measurements."""
