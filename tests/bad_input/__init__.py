"""The bad-input corpus (issue #28, items 5 and 6): declarative cases over every public entry
point, each checked for its error class, a message naming the user's object, and nothing
changed; a hypothesis strategy of malformed batches; names that must never escape."""
