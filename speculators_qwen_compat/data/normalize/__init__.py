"""One row turned into the conversation a chat template takes: roles, content, tool calls and
reasoning in one shape, and images and videos in upstream's form (paths, inline images)."""
