"""Bridges between codeward and other agent libraries.

Each module here imports its library only when it is itself imported, so this
package (and a base install of codeward) imports none of them.
"""
