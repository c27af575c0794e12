"""What every wing needs from the process and the machine: files written atomically (:mod:`.atomic`), native
thread pools sized before they start (:mod:`.threads`), the allocator's policy for large blocks
(:mod:`.allocator`), and optional extras looked up without importing them (:mod:`.extras`). The floor of the
package: it imports no other wing, and loads neither numpy nor torch on import.
"""
