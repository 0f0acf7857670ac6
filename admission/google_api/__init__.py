"""The Google Cloud half judged by Google's own API definitions, before anything is created.

Each Google Cloud resource the program declares becomes the request the
provider would send to create it (`request.build` over the mapping tables
of container.py, compute.py, storage.py, projects.py and registry.py), and
that request is checked against the method's definition in the discovery
document the pinned `google-api-python-client` ships (`validate`):
unknown fields, types, enums, formats, required fields and parameters.
`judge.resources_findings` runs both over a stack's declared resources;
`make plan` and the tests refuse a stack with any finding, the policy pack
reports them in `pulumi preview`. README.md has the coverage table.
"""
