"""Date and time formats (``settings.FORMAT_MODULE_PATH``): one timestamp format everywhere."""
