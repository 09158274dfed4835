"""The job document: what a person sends (its fields, the serializers that read and write
it, its checks, the submit form) and the declared query parameters.
"""
