"""Colours and fonts: Light, Dark or the system's choice; a font size; CJK everywhere.

Nothing here hard-codes a light theme: every colour the panels use is derived
from the current :class:`QPalette` (:func:`colors`), so a palette change — the
user switching the system to dark mode — only needs the panels to restyle.
Where the platform reports a dark scheme but the style still hands out a light
palette (older Windows styles, bare X11), :func:`apply_theme` installs a dark
Fusion palette itself.

Fonts: the UI font keeps the platform's family first and appends CJK-capable
families that are actually installed (Noto CJK, Microsoft YaHei/JhengHei,
PingFang, Hiragino, Source Han), ordered by the user's locale so Traditional
Chinese text gets Traditional glyph forms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QLocale, Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from agenvoy_desktop.settings import THEMES, AppearanceSettings

_CJK_BY_SCRIPT: dict[str, tuple[str, ...]] = {
    "tc": (
        "Noto Sans CJK TC",
        "Noto Sans CJK HK",
        "Source Han Sans TC",
        "Microsoft JhengHei UI",
        "Microsoft JhengHei",
        "PingFang TC",
    ),
    "sc": (
        "Noto Sans CJK SC",
        "Source Han Sans SC",
        "Microsoft YaHei UI",
        "Microsoft YaHei",
        "PingFang SC",
        "WenQuanYi Micro Hei",
    ),
    "jp": ("Noto Sans CJK JP", "Source Han Sans JP", "Yu Gothic UI", "Hiragino Sans", "Meiryo"),
    "kr": ("Noto Sans CJK KR", "Source Han Sans KR", "Malgun Gothic", "Apple SD Gothic Neo"),
}
_MONO_CJK = ("Noto Sans Mono CJK TC", "Noto Sans Mono CJK SC", "Noto Sans Mono CJK JP")
_MONO_FAMILIES = ("Cascadia Mono", "Consolas", "Menlo", "DejaVu Sans Mono", "Liberation Mono")


def _script_order(locale: QLocale) -> list[str]:
    """CJK scripts, the locale's own first (Han glyph forms differ between them)."""
    language = locale.language()
    if language == QLocale.Language.Chinese:
        traditional = locale.script() == QLocale.Script.TraditionalChineseScript or (
            locale.territory() in (QLocale.Country.Taiwan, QLocale.Country.HongKong)
        )
        first = "tc" if traditional else "sc"
    elif language == QLocale.Language.Japanese:
        first = "jp"
    elif language == QLocale.Language.Korean:
        first = "kr"
    else:
        first = "tc"  # the reference data is Traditional Chinese
    return [first, *(s for s in ("tc", "sc", "jp", "kr") if s != first)]


def cjk_fallbacks(locale: QLocale | None = None) -> list[str]:
    """Installed CJK-capable families in preference order."""
    installed = set(QFontDatabase.families())
    order = _script_order(locale or QLocale.system())
    return [f for script in order for f in _CJK_BY_SCRIPT[script] if f in installed]


def ui_font(base: QFont) -> QFont:
    """*base* with CJK fallbacks appended to its family list."""
    font = QFont(base)
    families = [*base.families()] or [base.family()]
    font.setFamilies([*families, *(f for f in cjk_fallbacks() if f not in families)])
    return font


def mono_font(point_size: float | None = None) -> QFont:
    """A fixed-pitch font for code that still renders CJK comments."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    installed = set(QFontDatabase.families())
    families = [font.family(), *(f for f in _MONO_FAMILIES if f in installed)]
    families += [f for f in _MONO_CJK if f in installed]
    font.setFamilies(families)
    if point_size is not None:
        font.setPointSizeF(point_size)
    return font


# -- colours ------------------------------------------------------------------------
def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    """*a* moved *amount* (0..1) of the way towards *b*."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


@dataclass(frozen=True, slots=True)
class Colors:
    """Everything the panels paint, as hex strings for style sheets."""

    dark: bool
    text: str
    muted: str
    base: str
    user_bubble: str
    assistant_bubble: str
    chip: str
    border: str
    accent: str
    warning_bg: str
    warning_fg: str
    error_bg: str
    error_fg: str
    info_bg: str
    code_bg: str


def colors(palette: QPalette) -> Colors:
    """Colours derived from *palette*, readable in light and dark themes."""
    dark = is_dark(palette)
    role = QPalette.ColorRole
    base = palette.color(role.Base)
    window = palette.color(role.Window)
    text = palette.color(role.Text)
    accent = palette.color(role.Highlight)
    amber = QColor("#b7791f")
    red = QColor("#c53030")
    blue = QColor("#2b6cb0")
    return Colors(
        dark=dark,
        text=text.name(),
        muted=_mix(text, base, 0.45).name(),
        base=base.name(),
        user_bubble=_mix(base, accent, 0.22 if dark else 0.12).name(),
        assistant_bubble=_mix(base, window, 0.5).name(),
        chip=_mix(window, text, 0.07).name(),
        border=_mix(window, text, 0.22).name(),
        accent=accent.name(),
        warning_bg=_mix(base, amber, 0.25 if dark else 0.16).name(),
        warning_fg=_mix(text, amber, 0.35).name(),
        error_bg=_mix(base, red, 0.3 if dark else 0.14).name(),
        error_fg=_mix(text, red, 0.3 if dark else 0.55).name(),
        info_bg=_mix(base, blue, 0.3 if dark else 0.12).name(),
        code_bg=_mix(base, text, 0.06 if dark else 0.04).name(),
    )


def chat_style(palette: QPalette) -> str:
    """One style sheet for everything inside the chat view.

    Set once on the view (not per bubble): per-widget style sheets made
    opening a long session measurably slower.  Widgets select variants with
    dynamic properties (``role``, ``failed``, ``flash``; see :func:`set_flag`).
    """
    c = colors(palette)
    return f"""
        #ChatBubble {{ background: {c.assistant_bubble}; border: 1px solid {c.border};
                       border-radius: 8px; }}
        #ChatBubble[role="user"] {{ background: {c.user_bubble}; border-color: {c.user_bubble}; }}
        #ChatBubble[flash="true"], #ToolChip[flash="true"] {{ border: 2px solid {c.accent}; }}
        #BubbleHeader {{ color: {c.muted}; }}
        #InterruptedMark {{ color: {c.warning_fg}; font-style: italic; }}
        #ToolChip {{ background: {c.chip}; border: 1px solid {c.border}; border-radius: 6px; }}
        #ToolChip[failed="true"] {{ border-color: {c.error_fg}; }}
        #ToolChip QToolButton {{ text-align: left; padding: 3px 6px; border: none; }}
        #ToolHint {{ background: {c.warning_bg}; color: {c.text}; padding: 6px;
                     border-radius: 4px; }}
        #ToolSection {{ color: {c.muted}; }}
        #CodeBlock {{ background: {c.code_bg}; border: 1px solid {c.border};
                      border-radius: 4px; }}
        #CodeBlock QLabel, #CodeBlock QScrollArea {{ background: transparent; }}
        #CodeLanguage {{ color: {c.muted}; }}
        #ModelBanner {{ background: {c.warning_bg}; border: 1px solid {c.border};
                        border-radius: 6px; }}
        #ModelBanner QLabel {{ color: {c.text}; }}
    """


def apply_sheet(widget: QWidget, sheet: Callable[[QPalette], str]) -> None:
    """Give *widget* a style sheet made from the application's current palette.

    The sheet is cleared first, so the widget (and its children) drop the
    palette they were polished with and take the application's again.  A
    widget with a style sheet is not told when the application palette
    changes (light/dark switch): the main window, which is, calls the
    ``restyle()`` of such widgets.
    """
    widget.setStyleSheet("")
    widget.setStyleSheet(sheet(QGuiApplication.palette()))


def set_flag(widget: QWidget, name: str, value: bool | str) -> None:
    """Set a dynamic property a style sheet selects on, and re-apply the style."""
    if widget.property(name) == value:
        return
    widget.setProperty(name, value)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def strip_style(palette: QPalette, level: str) -> str:
    """Style sheet of the error strip (level "error" or "info")."""
    c = colors(palette)
    bg, fg = (c.error_bg, c.error_fg) if level == "error" else (c.info_bg, c.text)
    return (
        f"#ErrorStrip {{ background: {bg}; border: 1px solid {c.border}; border-radius: 4px; }}"
        f" #ErrorStrip QLabel {{ color: {fg}; }}"
    )


# -- application ----------------------------------------------------------------------
_THEME = "agenvoyTheme"
_BASE_STYLE = "agenvoyBaseStyle"
_BASE_FONT = "agenvoyBaseFont"
_DARK_INSTALLED = "agenvoyDarkPalette"


def _dark_palette() -> QPalette:
    palette = QPalette()
    role = QPalette.ColorRole
    entries = {
        role.Window: "#202124",
        role.WindowText: "#e8eaed",
        role.Base: "#17181a",
        role.AlternateBase: "#26282b",
        role.ToolTipBase: "#2d2f33",
        role.ToolTipText: "#e8eaed",
        role.Text: "#e8eaed",
        role.Button: "#2b2d31",
        role.ButtonText: "#e8eaed",
        role.BrightText: "#ff6b6b",
        role.Highlight: "#3d7bd9",
        role.HighlightedText: "#ffffff",
        role.Link: "#8ab4f8",
        role.PlaceholderText: "#9aa0a6",
    }
    for key, value in entries.items():
        palette.setColor(key, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for key in (role.Text, role.ButtonText, role.WindowText):
        palette.setColor(disabled, key, QColor("#6b6f75"))
    return palette


def system_wants_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication) -> None:
    """Fonts with CJK fallbacks; a dark palette when the system is dark.

    Connected to the system's scheme changes, so switching the desktop to
    dark mode while the app runs restyles it too (unless the user chose Light
    or Dark in Settings: :func:`apply_appearance`).  The platform's style and
    font are remembered so "System" and the default size can go back to them.
    """
    font = ui_font(app.font())
    app.setProperty(_BASE_STYLE, app.style().name())
    app.setProperty(_BASE_FONT, font)
    app.setFont(font)
    _apply_scheme(app)
    app.styleHints().colorSchemeChanged.connect(lambda _scheme: _apply_scheme(app))


def apply_appearance(app: QApplication, appearance: AppearanceSettings) -> None:
    """The user's theme and font size, at once (no restart).

    "light" and "dark" install Fusion with our palettes, whatever the system
    says; "system" goes back to the platform's style and follows its scheme.
    A font size of 0 is the platform's.  Widgets with style sheets are
    restyled by the main window, which hears the palette change.
    """
    base = app.property(_BASE_FONT)
    if not isinstance(base, QFont):  # apply_theme did not run (tests): today's font is the base
        base = ui_font(app.font())
        app.setProperty(_BASE_FONT, base)
    font = QFont(base)
    if appearance.font_size > 0:
        font.setPointSize(appearance.font_size)
    if font != app.font():
        app.setFont(font)
    theme = appearance.theme if appearance.theme in THEMES else "system"
    if theme == app.property(_THEME) or (theme == "system" and not app.property(_THEME)):
        return
    app.setProperty(_THEME, theme)
    if theme == "system":
        app.setStyle(str(app.property(_BASE_STYLE) or "Fusion"))
        app.setPalette(app.style().standardPalette())
        app.setProperty(_DARK_INSTALLED, False)
        _apply_scheme(app)
        return
    app.setStyle("Fusion")
    app.setPalette(_dark_palette() if theme == "dark" else app.style().standardPalette())
    app.setProperty(_DARK_INSTALLED, False)


def current_theme(app: QApplication) -> str:
    """The theme :func:`apply_appearance` last installed ("system" before any)."""
    return str(app.property(_THEME) or "system")


def _apply_scheme(app: QApplication) -> None:
    """Install our dark palette only where the platform did not provide one."""
    if current_theme(app) != "system":
        return  # the user chose Light or Dark: the system's scheme does not matter
    installed = bool(app.property(_DARK_INSTALLED))
    if system_wants_dark() and not installed and not is_dark(app.palette()):
        app.setStyle("Fusion")
        app.setPalette(_dark_palette())
        app.setProperty(_DARK_INSTALLED, True)
    elif not system_wants_dark() and installed:
        app.setPalette(app.style().standardPalette())
        app.setProperty(_DARK_INSTALLED, False)
