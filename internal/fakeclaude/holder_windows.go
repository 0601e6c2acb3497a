package main

// holdOutput does nothing on Windows.
func holdOutput(string) {}
