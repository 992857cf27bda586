// The commands that change documents: insert, update, delete.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/loader.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

namespace {

// The lines of a descriptor, each at most JsonDocumentStream's limit on a
// document's text: a longer one is an error, not memory without end
// (`insert < /dev/zero` has no newline). read(2), not fread: a line is
// taken as soon as it arrives (a producer writing slowly, with --batch 1
// and --echo), and a read error (EIO, a directory as stdin) is told from
// the end of the input.
class LineReader {
 public:
  static constexpr size_t kMaxLine = JsonDocumentStream::kMaxJsonDocumentText;
  enum class Next { kLine, kEnd, kTooLong, kError };

  explicit LineReader(int fd) : fd_(fd), buf_(1 << 16, '\0') {}

  // The next line, without its '\n', into *line; errno after kError.
  Next Read(std::string* line) {
    line->clear();
    bool any = false;
    for (;;) {
      if (pos_ == len_) {
        ssize_t n;
        do {
          n = ::read(fd_, buf_.data(), buf_.size());
        } while (n < 0 && errno == EINTR);
        if (n < 0) return Next::kError;
        len_ = static_cast<size_t>(n);
        pos_ = 0;
        if (len_ == 0) return any ? Next::kLine : Next::kEnd;
      }
      any = true;
      const char* start = buf_.data() + pos_;
      const auto* nl = static_cast<const char*>(std::memchr(start, '\n', len_ - pos_));
      const size_t n = nl != nullptr ? static_cast<size_t>(nl - start) : len_ - pos_;
      if (line->size() + n > kMaxLine) return Next::kTooLong;
      line->append(start, n);
      pos_ += n;
      if (nl != nullptr) {
        pos_++;
        return Next::kLine;
      }
    }
  }

 private:
  const int fd_;
  std::string buf_;
  size_t pos_ = 0, len_ = 0;
};

}  // namespace

int RunInsert(const CommonArgs& c, const InsertArgs& a) {
  if (StdinClosed()) return Fail(kExitBadInput, "standard input", std::strerror(EBADF));
  int code = kExitOk;
  // Opened (and made) at the first valid document: bad input from the start
  // leaves no new database behind.
  std::unique_ptr<DB> db;
  std::unique_ptr<Loader> loader;
  std::string line;
  uint64_t line_no = 0;
  LineReader in(STDIN_FILENO);
  LineReader::Next next;
  while ((next = in.Read(&line)) == LineReader::Next::kLine) {
    ++line_no;
    // A UTF-8 byte order mark before the first line, as import skips it.
    if (line_no == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (IsBlank(line)) continue;
    const std::string where = "line " + std::to_string(line_no);
    auto doc = Document::FromJson(line);
    if (!doc.ok()) {
      if (loader == nullptr) return Fail(kExitBadInput, where, JsonError(doc.status()));
      return FailInsert(loader.get(), where, JsonError(doc.status()));
    }
    if (loader == nullptr) {
      db = OpenDb(c, Access::kCreate, &code);
      if (!db) return code;
      loader = std::make_unique<Loader>(db.get(), c.collection, a.batch, a.echo);
    }
    Status s = loader->Add(*doc);
    if (!s.ok()) return FailInsert(loader.get(), where, Describe(s));
  }
  if (next == LineReader::Next::kTooLong) {
    const std::string where = "line " + std::to_string(line_no + 1);
    const std::string detail =
        "document text is longer than " + std::to_string(LineReader::kMaxLine >> 20) + " MiB";
    if (loader == nullptr) return Fail(kExitBadInput, where, detail);
    return FailInsert(loader.get(), where, detail);
  }
  const std::string read_error = next == LineReader::Next::kError ? std::strerror(errno) : "";
  if (loader == nullptr) {
    if (!read_error.empty()) return Fail(kExitBadInput, "standard input", read_error);
    return kExitOk;  // nothing to insert
  }
  if (!read_error.empty()) return FailInsert(loader.get(), "standard input", read_error);
  Status s = loader->Flush();
  if (!s.ok()) return FailCommit(*loader, "commit", s);
  return CloseDb(db.get());
}

int RunUpdate(const CommonArgs& c, const std::string& filter_json, const std::string& update_json,
              bool many, bool upsert) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto update = ParseDocArg("update", update_json, &code);
  if (!update) return code;
  // An upsert may insert, so it creates the database as insert does.
  auto db = OpenDb(c, upsert ? Access::kCreate : Access::kWrite, &code);
  if (!db) return code;
  UpdateOptions options;
  options.upsert = upsert;
  auto r = many ? db->UpdateMany(c.collection, *filter, *update, options)
                : db->UpdateOne(c.collection, *filter, *update, options);
  if (!r.ok()) return FailStatus("update", r.status());
  NoteCommitted();
  std::printf("{\"matched\": %llu, \"modified\": %llu", static_cast<unsigned long long>(r->matched),
              static_cast<unsigned long long>(r->modified));
  if (r->upserted_id) std::printf(", \"upserted\": %s", r->upserted_id->ToJson().c_str());
  std::printf("}\n");
  return CloseDb(db.get());
}

int RunDelete(const CommonArgs& c, const std::string& filter_json, bool many) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, Access::kWrite, &code);
  if (!db) return code;
  auto r = many ? db->DeleteMany(c.collection, *filter) : db->DeleteOne(c.collection, *filter);
  if (!r.ok()) return FailStatus("delete", r.status());
  NoteCommitted();
  std::printf("{\"deleted\": %llu}\n", static_cast<unsigned long long>(*r));
  return CloseDb(db.get());
}

}  // namespace mmdoc::tool
