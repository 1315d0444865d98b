// A tiny SVG / HTML writer for the report page (report/report.h): text
// escaped for XML and HTML (attributes and content alike), numbers printed
// compactly, and an Svg builder of the few shapes the pictures use. Every
// shape may carry a hover text (an SVG <title>, which browsers show on
// hover without any script). Nothing here knows what is drawn.
#pragma once

#include <string>
#include <string_view>

namespace foldplan {

// `text` with & < > " ' replaced by entities: safe in element content and
// in single- or double-quoted attributes (layout strings hold '<' in no
// format today, but a cluster or model name may hold anything).
std::string EscapeXml(std::string_view text);

// A number for coordinates: at most `digits` decimals, no trailing zeros
// ("12", "12.5"); non-finite values print as 0 so the SVG stays valid.
std::string Num(double v, int digits = 2);

// A duration with its unit: "1.23 s", "45.6 ms", "812 us".
std::string SecondsText(double s);

class Svg {
 public:
  // `css_class` is the <svg> element's class (the page's stylesheet styles it).
  Svg(double width_px, double height_px, std::string_view css_class);

  // `attrs` are extra attributes, already escaped (e.g. `data-rank="3"`);
  // `title` is the hover text, escaped here ("" for none).
  void Rect(double x, double y, double w, double h, std::string_view fill, std::string_view title = "",
            std::string_view attrs = "");
  void Circle(double cx, double cy, double r, std::string_view fill, std::string_view title = "",
              std::string_view attrs = "");
  void Line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view attrs = "");
  // Points "x,y x,y ...", as built by the caller with Num().
  void Polyline(std::string_view points, std::string_view stroke, double width = 1.5, std::string_view attrs = "");
  // `anchor`: start, middle or end.
  void Text(double x, double y, std::string_view text, std::string_view anchor = "start", double size_px = 11,
            std::string_view attrs = "");
  // Raw markup, for a group the caller builds; must be valid SVG.
  void Raw(std::string_view markup) { body_ += markup; }

  double width() const { return width_; }
  double height() const { return height_; }
  // The whole <svg> element.
  std::string Finish() const;

 private:
  double width_, height_;
  std::string class_;
  std::string body_;
};

}  // namespace foldplan
