"""What an answer says: wording, the verdict, minds, and the text an LLM reads. Pure."""
