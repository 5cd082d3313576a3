"""Model calls: declared entries, the client (cache, concurrency, retries), failures, LiteLLM, mocks.

Every model call goes through here. May import only `errors` and `datatypes`; LiteLLM is imported lazily,
at the first real call.
"""
