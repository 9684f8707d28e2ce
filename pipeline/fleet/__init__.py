"""Where jobs run: Ray access, flopwatch's local head, head watch, local probes, slots and their dispatcher.
May import: workers."""
