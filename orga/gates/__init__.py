"""The gate's engines: what the policy activity asks.

Modules:

* ``default`` — the ``default`` gate's rules (fail closed), and how an engine's verdict joins
* ``cedar`` — Cedar policies from a directory, evaluated by cedarpy with the schema
* ``opa`` — an Open Policy Agent server asked over HTTP
* ``whatif`` — a policy set asked again what an engine was asked (what-if, policy test cases)
"""

__all__: list[str] = []
