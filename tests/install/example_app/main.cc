// Creates a database, inserts and reads documents through an installed
// mmdoc, and prints what it did. Exits non-zero on any failure.
#include <mmdoc/db.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: example DB\n");
    return 2;
  }
  auto db = mmdoc::DB::Open(argv[1]);
  if (!db.ok()) {
    std::fprintf(stderr, "open: %s\n", db.status().ToString().c_str());
    return 1;
  }
  auto doc = mmdoc::Document::FromJson(R"({"_id": "ada", "born": 1815})");
  mmdoc::Status s = db.value()->Insert("people", doc.value());
  if (!s.ok()) {
    std::fprintf(stderr, "insert: %s\n", s.ToString().c_str());
    return 1;
  }
  auto got = db.value()->Get("people", mmdoc::Value::String("ada"));
  if (!got.ok()) {
    std::fprintf(stderr, "get: %s\n", got.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", got.value().ToJson().c_str());
  return db.value()->Check().ok() ? 0 : 1;
}
