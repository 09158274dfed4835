"""The portal around the product: settings, probes, metrics, sign-in and login throttling,
the web server, embedded services, the deploy manifests, the image, the supervisor and the
benchmark's report."""
