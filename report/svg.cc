#include "report/svg.h"

#include <cmath>
#include <cstdio>

namespace foldplan {

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v, int digits) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string SecondsText(double s) {
  char buf[48];
  const double a = std::fabs(s);
  if (a >= 1) std::snprintf(buf, sizeof buf, "%.3g s", s);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

namespace {

// The shape's closing: self-closed, or with its <title> inside.
void Close(std::string& out, std::string_view tag, std::string_view title) {
  if (title.empty()) {
    out += "/>";
  } else {
    out += "><title>" + EscapeXml(title) + "</title></";
    out += tag;
    out += ">";
  }
}

void Extra(std::string& out, std::string_view attrs) {
  if (attrs.empty()) return;
  out += ' ';
  out += attrs;
}

}  // namespace

Svg::Svg(double width_px, double height_px, std::string_view css_class)
    : width_(width_px), height_(height_px), class_(css_class) {}

void Svg::Rect(double x, double y, double w, double h, std::string_view fill, std::string_view title,
               std::string_view attrs) {
  body_ += "<rect x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" + Num(w) + "\" height=\"" + Num(h) +
           "\" fill=\"" + EscapeXml(fill) + "\"";
  Extra(body_, attrs);
  Close(body_, "rect", title);
}

void Svg::Circle(double cx, double cy, double r, std::string_view fill, std::string_view title,
                 std::string_view attrs) {
  body_ += "<circle cx=\"" + Num(cx) + "\" cy=\"" + Num(cy) + "\" r=\"" + Num(r) + "\" fill=\"" + EscapeXml(fill) +
           "\"";
  Extra(body_, attrs);
  Close(body_, "circle", title);
}

void Svg::Line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view attrs) {
  body_ += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" + Num(y2) +
           "\" stroke=\"" + EscapeXml(stroke) + "\" stroke-width=\"" + Num(width) + "\"";
  Extra(body_, attrs);
  body_ += "/>";
}

void Svg::Polyline(std::string_view points, std::string_view stroke, double width, std::string_view attrs) {
  body_ += "<polyline fill=\"none\" points=\"";
  body_ += points;
  body_ += "\" stroke=\"" + EscapeXml(stroke) + "\" stroke-width=\"" + Num(width) + "\"";
  Extra(body_, attrs);
  body_ += "/>";
}

void Svg::Text(double x, double y, std::string_view text, std::string_view anchor, double size_px,
               std::string_view attrs) {
  body_ += "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" font-size=\"" + Num(size_px) + "\"";
  if (anchor != "start") body_ += " text-anchor=\"" + std::string(anchor) + "\"";
  Extra(body_, attrs);
  body_ += ">" + EscapeXml(text) + "</text>";
}

std::string Svg::Finish() const {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"" + EscapeXml(class_) + "\" width=\"" + Num(width_) +
         "\" height=\"" + Num(height_) + "\" viewBox=\"0 0 " + Num(width_) + " " + Num(height_) + "\">" + body_ +
         "</svg>";
}

}  // namespace foldplan
