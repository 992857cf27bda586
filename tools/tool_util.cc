#include "tools/tool_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace mmdoc::tool {
namespace {
// The bar on screen, erased before an error message is printed so that the
// message gets a line of its own.
Progress* active_progress = nullptr;
}  // namespace

std::string Printable(std::string_view text) {
  std::string shown;
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      shown += hex;
    } else {
      shown += ch;
    }
  }
  return shown;
}

namespace {
bool stdin_closed = false;  // ClaimStdio found descriptor 0 closed
bool committed = false;     // NoteCommitted
}  // namespace

void ClaimStdio() {
  for (int fd = 0; fd <= 2; fd++) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 0) stdin_closed = true;
    // The lowest free descriptor: this one, as the lower ones are taken.
    // Read-only, so that output written to it still fails (EBADF), as it
    // did with the descriptor closed.
    const int got = ::open("/dev/null", O_RDONLY);
    if (got != fd && got >= 0) ::close(got);
  }
}

bool StdinClosed() { return stdin_closed; }

void NoteCommitted() { committed = true; }
bool Committed() { return committed; }

namespace {

void PrintLine(std::string_view prefix, std::string_view what, std::string_view detail) {
  std::string line(prefix);
  line.append(what.data(), what.size());
  if (!detail.empty()) {
    line += ": ";
    line.append(detail.data(), detail.size());
  }
  // One line, whatever the detail holds (libbson messages may span lines).
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::replace(line.begin(), line.end(), '\r', ' ');
  line = Printable(line) + '\n';
  if (active_progress != nullptr) active_progress->Finish();
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
}

}  // namespace

int Fail(int code, std::string_view what, std::string_view detail) {
  PrintLine("mmdoc: ", what, detail);
  return code;
}

void Warn(std::string_view what, std::string_view detail) {
  PrintLine("mmdoc: warning: ", what, detail);
}

int ExitCodeFor(const Status& s) { return s.IsNotFound() ? kExitNotFound : kExitBadInput; }

std::string Describe(const Status& s) {
  switch (s.code()) {
    case Status::Code::kBusy:
      // The storage layer's message already says this and names the file;
      // say it once.
      if (s.message().find("locked") != std::string::npos) return s.message();
      return "database is locked by another process or handle: " + s.message();
    case Status::Code::kNotFound:
    case Status::Code::kAlreadyExists:  // the message names the value
    case Status::Code::kInvalidArgument:
      return s.message();
    case Status::Code::kFull:
      return "disk full: " + s.message();
    default:
      return s.ToString();
  }
}

int FailStatus(std::string_view what, const Status& s) {
  return Fail(ExitCodeFor(s), what, Describe(s));
}

std::string JsonError(const Status& s) {
  std::string m = s.message();
  // Well-formed JSON past a limit is not "invalid JSON".
  if (m.rfind("document is larger than", 0) == 0 || m.rfind("document nested deeper", 0) == 0) {
    return m;
  }
  for (const char* prefix : {"invalid JSON: ", "Invalid JSON: "}) {
    if (m.rfind(prefix, 0) == 0) m.erase(0, std::strlen(prefix));
  }
  return "invalid JSON: " + m;
}

std::optional<Document> ParseDocArg(std::string_view what, const std::string& json, int* code) {
  auto doc = Document::FromJson(json);
  if (!doc.ok()) {
    *code = Fail(kExitBadInput, what, JsonError(doc.status()) + " in " + json);
    return std::nullopt;
  }
  return std::move(doc).value();
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

JsonMode ParseJsonMode(const std::string& name) {
  return name == "canonical" ? JsonMode::kCanonical : JsonMode::kRelaxed;
}

bool WriteDoc(FILE* out, const DocFormat& format, std::string_view raw, std::string* json,
              std::string* error) {
  if (format.bson) {
    if (std::fwrite(raw.data(), 1, raw.size(), out) != raw.size()) {
      *error = std::strerror(errno);
      return false;
    }
    return true;
  }
  if (!BsonToJson(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), json,
                  format.json_mode)) {
    *error = "document cannot be written as JSON (invalid UTF-8?)";
    return false;
  }
  json->push_back('\n');
  if (std::fwrite(json->data(), 1, json->size(), out) != json->size()) {
    *error = std::strerror(errno);
    return false;
  }
  return true;
}

std::string FieldPathProblem(std::string_view path) {
  if (path.empty()) return "empty field path";
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string_view part = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty()) return "empty part in field path";
    if (part[0] == '$') return "a field name cannot start with '$'";
    if (dot == std::string_view::npos) return "";
    start = dot + 1;
  }
}

bool ParseInt64(std::string_view text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

bool BsonToJson(const uint8_t* data, size_t size, std::string* out, JsonMode mode) {
  return mmdoc::BsonToJson(data, size, mode, out);
}

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (enabled_) active_progress = this;
}

void Progress::Draw(uint64_t done, uint64_t docs) {
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::milliseconds(500)) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  double secs = std::chrono::duration<double>(now - start_).count();
  char buf[160];
  if (total_ > 0) {
    constexpr int kWidth = 30;
    double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    int filled = static_cast<int>(frac * kWidth);
    std::string bar(filled, '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::snprintf(buf, sizeof(buf), "\r%s [%s] %3d%%  %llu docs  %.0f docs/s\x1b[K", label_.c_str(),
                  bar.c_str(), static_cast<int>(frac * 100), static_cast<unsigned long long>(docs),
                  docs / std::max(secs, 1e-9));
  } else {
    std::snprintf(buf, sizeof(buf), "\r%s  %llu docs  %.0f docs/s\x1b[K", label_.c_str(),
                  static_cast<unsigned long long>(docs), docs / std::max(secs, 1e-9));
  }
  std::fputs(buf, stderr);
  std::fflush(stderr);
}

void Progress::Finish() {
  if (drawn_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }
  enabled_ = false;
  if (active_progress == this) active_progress = nullptr;
}

}  // namespace mmdoc::tool
