// Package agent calls language models for agent steps: the providers of the server config's agents section, behind engine.AgentCaller.
// It imports the engine's types and the providers' SDKs only, never the worker, another runner, the api or the store.
package agent
