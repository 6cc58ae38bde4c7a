"""What the picture tests share: checks that print and record their
outcome, the exit status they end with, and the chart description an SVG
drawn by tools/charts carries in <metadata id="energy-chart">.
"""
import json
import re
import sys

failures = []


def check(condition, message):
    print(('ok    ' if condition else 'FAIL  ') + message)
    if not condition:
        failures.append(message)


def finish():
    """Exits non-zero when a check failed."""
    if failures:
        sys.exit('%d check(s) failed' % len(failures))
    print('all checks passed')


def chart_metadata(text):
    """The chart description in an SVG's text (JSON, XML-escaped)."""
    meta = re.search(r'<metadata id="energy-chart">(.*?)</metadata>', text, re.S)
    return json.loads(meta.group(1).replace('&lt;', '<').replace('&amp;', '&'))
