"""Static files: under content-hashed names, gzip and brotli compressed, once ``manage.py collectstatic`` has written
its manifest (the demo and the compose file run it at start; WhiteNoise then serves them cached for a year); as they
are in static/, through the finders, before it has (a checkout running its tests)."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False  # a file added since the last collectstatic is served by its own name

    def stored_name(self, name):
        if not self.hashed_files:  # no manifest yet: nothing has been hashed
            return name
        return super().stored_name(name)
