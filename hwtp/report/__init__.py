"""``hwtp report``: one self-contained HTML page from run folders, scores files and ``hwtp ci``
reports. ``data`` gathers, ``plots`` draws (inline SVG), ``render`` fills ``templates/``."""
