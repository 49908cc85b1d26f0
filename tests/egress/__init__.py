"""Tests of the egress allow-list, and the local internet they run against (`internet`)."""
