"""Static files: collectstatic's copies, compressed, once they are there (the image); the
apps' and static/'s own files otherwise (the demo). portal/settings.py, static_finders."""

from __future__ import annotations

from django.core.management import call_command
from django.test import RequestFactory, override_settings
from whitenoise.middleware import WhiteNoiseMiddleware

from portal.settings import static_finders


def _served(root, request):
    with override_settings(
        STATIC_ROOT=root, WHITENOISE_USE_FINDERS=static_finders(root, debug=False)
    ):
        return WhiteNoiseMiddleware(lambda request: None)(request)


def test_collected_files_are_served_compressed_and_found_ones_before_collectstatic(tmp_path):
    request = RequestFactory().get("/static/htmx.min.js", headers={"Accept-Encoding": "gzip"})
    found = _served(tmp_path, request)
    assert found.status_code == 200
    assert "Content-Encoding" not in found

    with override_settings(STATIC_ROOT=tmp_path):
        call_command("collectstatic", interactive=False, verbosity=0)
    collected = _served(tmp_path, request)

    assert collected["Content-Encoding"] == "gzip"
    assert int(collected["Content-Length"]) * 2 < int(found["Content-Length"])


def test_debug_always_finds_the_files_being_edited(tmp_path):
    (tmp_path / "caldera.css.gz").write_bytes(b"")
    assert static_finders(tmp_path, debug=True)
    assert not static_finders(tmp_path, debug=False)
