#include "tools/loader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Documents per transaction are also capped by their bytes, so that a
// batch of large documents does not become one huge transaction.
constexpr uint64_t kMaxBatchBytes = 32u << 20;

// A byte of input for an error message: 'x', or its value when it is not
// printable ASCII.
std::string ShowByte(int c) {
  if (c < 0) return "the end of the file";
  if (c > 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "byte 0x%02x", static_cast<unsigned>(c));
  return buf;
}

// The document's _id as JSON, or "" when it has none.
std::string IdJson(const Document& doc) {
  auto id = doc.Get("_id");
  return id.ok() ? id->ToJson() : std::string();
}

}  // namespace

Loader::Loader(DB* db, std::string collection, uint64_t batch, bool echo)
    : db_(db), collection_(std::move(collection)), batch_(batch == 0 ? 1 : batch), echo_(echo) {}

Loader::~Loader() {
  // An error path that did not Flush: drop the partial batch. Callers
  // Flush first whenever what came before the error should stay.
  txn_.reset();
}

Status Loader::Add(const Document& doc) {
  if (!txn_) {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    txn_ = std::move(txn).value();
  }
  Value id;
  Status s = txn_->Insert(collection_, doc, &id);
  if (!s.ok()) return Explain(s, doc);
  ids_.push_back(std::move(id));
  bytes_ += doc.size();
  if (ids_.size() >= batch_ || bytes_ >= kMaxBatchBytes) return Flush();
  return Status::OK();
}

Status Loader::Flush() {
  if (!txn_) return Status::OK();
  Status s = txn_->Commit();
  txn_.reset();
  if (!s.ok()) {
    failed_commit_ = ids_.size();
    ids_.clear();
    bytes_ = 0;
    return s;
  }
  inserted_ += ids_.size();
  if (!ids_.empty()) NoteCommitted();
  if (echo_) {
    for (const Value& id : ids_) {
      std::string line = id.ToJson();
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
    std::fflush(stdout);
  }
  ids_.clear();
  bytes_ = 0;
  return Status::OK();
}

std::string Loader::FailedCommitNote(const std::string& why) const {
  if (failed_commit_ == 0) return "";
  const auto n = static_cast<unsigned long long>(failed_commit_);
  const auto m = static_cast<unsigned long long>(inserted_);
  std::string note = " (the commit of the " + std::to_string(n) +
                     (n == 1 ? " document" : " documents") + " up to here failed";
  if (!why.empty()) note += ": " + why;
  if (m == 0) {
    note += "; nothing was committed)";
  } else {
    note += "; the " + std::to_string(m) + (n == 1 ? " before it are" : " before them are") +
            " committed)";
  }
  return note;
}

Status Loader::Explain(const Status& s, const Document& doc) {
  if (!s.IsAlreadyExists()) return s;
  std::string id = IdJson(doc);
  if (!id.empty()) {
    auto existing = doc.Get("_id");
    if (existing.ok() && txn_->Get(collection_, *existing).ok()) {
      return Status::AlreadyExists("duplicate _id " + id);
    }
  }
  return Status::AlreadyExists("unique index violation", s.message());
}

int FailInsert(Loader* loader, const std::string& where, const std::string& detail) {
  Status s = loader->Flush();
  std::string note = loader->FailedCommitNote(s.ok() ? "" : Describe(s));
  if (!s.ok() && note.empty()) {
    // The failed commit held no document (the first one failed): say what
    // stands.
    const auto m = loader->inserted();
    note = m == 0 ? " (nothing was committed)"
                  : " (the " + std::to_string(m) + " before it are committed)";
  }
  return Fail(kExitBadInput, where, detail + note);
}

int FailCommit(const Loader& loader, const std::string& what, const Status& s) {
  return Fail(ExitCodeFor(s), what, Describe(s) + loader.FailedCommitNote());
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

JsonDocumentStream::JsonDocumentStream(FILE* in, bool require_array)
    : in_(in), require_array_(require_array), buf_(64u << 10, '\0') {}

int JsonDocumentStream::Peek() {
  if (pos_ == end_) {
    if (read_error_) return -1;
    pos_ = 0;
    end_ = std::fread(buf_.data(), 1, buf_.size(), in_);
    if (end_ == 0) {
      if (std::ferror(in_)) {
        read_error_ = true;
        error_ = std::strerror(errno);
      }
      return -1;
    }
  }
  return static_cast<unsigned char>(buf_[pos_]);
}

void JsonDocumentStream::SkipSpace() {
  for (int c = Peek(); c == ' ' || c == '\t' || c == '\r' || c == '\n'; c = Peek()) Skip();
}

JsonDocumentStream::Next JsonDocumentStream::Fail(std::string message) {
  // Past the last document: the error is where the next one should be.
  ++document_;
  start_line_ = line_;
  if (!read_error_) error_ = std::move(message);
  return Next::kError;
}

JsonDocumentStream::Next JsonDocumentStream::Read(std::string* text) {
  if (!started_) {
    started_ = true;
    if (Peek() == 0xEF && end_ - pos_ >= 3 && std::memcmp(&buf_[pos_], "\xEF\xBB\xBF", 3) == 0) {
      pos_ += 3;  // a UTF-8 byte order mark
      bytes_ += 3;
    }
    SkipSpace();
    if (Peek() == '[') {
      Skip();
      in_array_ = true;
    } else if (require_array_) {
      return Fail("expected a JSON array ('[', as --json-array says), got " + ShowByte(Peek()));
    }
  }
  SkipSpace();
  int c = Peek();
  if (in_array_ && !done_) {
    if (c == ']') {
      Skip();
      done_ = true;
      SkipSpace();
      c = Peek();
    } else if (document_ > 0) {
      if (c != ',') {
        return Fail(c < 0
                        ? "the array is not closed (no ']' before the end of the file)"
                        : "expected ',' or ']' after a document in the array, got " + ShowByte(c));
      }
      Skip();
      SkipSpace();
      c = Peek();
    }
    if (!done_ && c < 0) {
      return Fail("the array is not closed (no ']' before the end of the file)");
    }
  }
  if (c < 0) return read_error_ ? Next::kError : Next::kEnd;
  if (done_) return Fail("text after the end of the array: " + ShowByte(c));
  if (c != '{') return Fail("expected a document ('{'), got " + ShowByte(c));
  return ReadDocument(text);
}

JsonDocumentStream::Next JsonDocumentStream::ReadDocument(std::string* text) {
  ++document_;
  start_line_ = line_;
  text->clear();
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (;;) {
    if (Peek() < 0) {
      if (read_error_) return Next::kError;
      error_ = "invalid JSON: the document is not closed (no '}' before the end of the file)";
      return Next::kError;
    }
    size_t i = pos_;
    bool closed = false;
    for (; i < end_ && !closed; ++i) {
      const char ch = buf_[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (ch == '\\') {
          escaped = true;
        } else if (ch == '"') {
          in_string = false;
        } else if (ch == '\n') {
          // JSON strings cannot hold a line break: stop here rather than
          // take the lines after it into this document.
          error_ =
              "invalid JSON: a string is not closed at the end of line " + std::to_string(line_);
          return Next::kError;
        }
        continue;
      }
      switch (ch) {
        case '"':
          in_string = true;
          break;
        case '{':
          ++depth;
          break;
        case '}':
          closed = --depth == 0;
          break;
        case '\n':
          ++line_;
          break;
        default:
          break;
      }
    }
    text->append(buf_, pos_, i - pos_);
    bytes_ += i - pos_;
    pos_ = i;
    if (closed) return Next::kDocument;
    if (text->size() > kMaxJsonDocumentText) {
      error_ = "document text is longer than " + std::to_string(kMaxJsonDocumentText >> 20) +
               " MiB (is a '}' missing?)";
      return Next::kError;
    }
  }
}

}  // namespace mmdoc::tool
