package wiring
