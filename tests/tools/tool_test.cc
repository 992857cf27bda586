// The mmdoc tool, run as a separate process for every command and every
// error path: exit statuses 0/1/2 and one-line errors on stderr
// (DESIGN.md "Contracts"), and that nothing committed before an error is
// lost.
#include <bson/bson.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/small_disk.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

struct Run {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string ToolPath() { return BuildDir() + "/tools/mmdoc"; }

// Runs the tool with `args`, `input` on stdin; stdout and stderr go to
// files (no pipe can fill up and deadlock), stdout to `out_to` when given.
// Kills it after 60 s. `address_space` (bytes), when given: its ulimit -v.
Run RunTool(const std::vector<std::string>& args, const std::string& input = "",
            const std::string& out_to = "", rlim_t address_space = 0,
            const std::string& in_from = "") {
  static TempDir io;
  static int n = 0;
  const std::string base = io.File("run" + std::to_string(++n));
  WriteFile(base + ".in", input);
  std::vector<std::string> argv_s = {ToolPath()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int in = open((in_from.empty() ? base + ".in" : in_from).c_str(), O_RDONLY);
    int out = out_to.empty() ? open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)
                             : open(out_to.c_str(), O_WRONLY);
    int err = open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    const struct rlimit as = {address_space, address_space};
    if (address_space != 0 && setrlimit(RLIMIT_AS, &as) != 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int wstatus = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      FAIL("mmdoc timed out");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Run r;
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  r.out = ReadFile(base + ".out");
  r.err = ReadFile(base + ".err");
  return r;
}

std::string Show(const Run& r) {
  return "status " + std::to_string(r.status) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The failure contract: the status, and exactly one line on stderr that
// starts with "mmdoc: " and contains every one of `parts`.
void ExpectError(const Run& r, int status, const std::vector<std::string>& parts) {
  INFO(Show(r));
  CHECK(r.status == status);
  CHECK(r.err.rfind("mmdoc: ", 0) == 0);
  CHECK(Lines(r.err).size() == 1);
  CHECK(r.err.back() == '\n');
  for (const std::string& p : parts) CHECK(Contains(r.err, p));
}

Run MustRun(const std::vector<std::string>& args, const std::string& input = "") {
  Run r = RunTool(args, input);
  INFO("mmdoc " << args.at(0) << ": " << Show(r));
  REQUIRE(r.status == 0);
  return r;
}

uint64_t CountOf(const std::string& db, const std::string& filter = "{}",
                 const std::string& coll = "default") {
  Run r = MustRun({"count", db, filter, "-c", coll});
  return std::stoull(r.out);
}

void ExpectCheckOk(const std::string& db) {
  Run r = RunTool({"check", db});
  INFO(Show(r));
  CHECK(r.status == 0);
  CHECK(Contains(r.out, "ok"));
}

// Documents of many BSON types, one per line.
const char* kMixedDocs =
    R"({"_id": 1, "name": "ada", "age": 36, "tags": ["x", "y"]}
{"_id": "two", "name": "bob", "age": 41.5, "nested": {"a": {"b": [1, {"c": null}]}}}
{"_id": {"$oid": "507f1f77bcf86cd799439011"}, "when": {"$date": "2011-03-01T12:00:00Z"}}
{"_id": 4, "big": {"$numberLong": "9007199254740993"}, "flag": true, "bin": {"$binary": {"base64": "AAEC", "subType": "00"}}}
{"_id": 5, "unicode": "h\u00e9llo \u4e16\u754c", "neg": -7, "empty": {}}
)";

TEST_CASE("tool: help and usage errors", "[tools]") {
  Run help = RunTool({"--help"});
  INFO(Show(help));
  CHECK(help.status == 0);
  for (const char* cmd : {"insert", "get", "find", "update", "delete", "count", "index", "import",
                          "export", "stats", "check", "compact", "Exit status"}) {
    CHECK(Contains(help.out, cmd));
  }
  Run insert_help = RunTool({"insert", "--help"});
  CHECK(insert_help.status == 0);
  CHECK(Contains(insert_help.out, "--echo"));
  CHECK(Contains(insert_help.out, "--batch"));
  Run find_help = RunTool({"find", "--help"});
  CHECK(find_help.status == 0);
  CHECK(Contains(find_help.out, "--sort=-FIELD"));
  Run index_help = RunTool({"index", "create", "--help"});
  CHECK(index_help.status == 0);
  CHECK(Contains(index_help.out, "--unique"));

  ExpectError(RunTool({"frobnicate", "x.mmdb"}), 2, {"unknown command", "frobnicate"});
  ExpectError(RunTool({"index", "rebuild", "x.mmdb", "a"}), 2, {"unknown command", "rebuild"});
  ExpectError(RunTool({}), 2, {"usage"});
  ExpectError(RunTool({"insert"}), 2, {"insert", "DB"});
  ExpectError(RunTool({"get", "x.mmdb"}), 2, {"get", "ID"});
  ExpectError(RunTool({"update", "x.mmdb", "{}"}), 2, {"update", "UPDATE"});
  ExpectError(RunTool({"insert", "x.mmdb", "--durability", "sometimes"}), 2, {"durability"});
  ExpectError(RunTool({"insert", "x.mmdb", "--batch", "0"}), 2, {"batch"});
  ExpectError(RunTool({"find", "x.mmdb", "--bogus"}), 2, {"--bogus"});
}

TEST_CASE("tool: insert, get, find, count", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  Run ins = MustRun({"insert", db, "--echo"}, kMixedDocs);
  std::vector<std::string> ids = Lines(ins.out);
  REQUIRE(ids.size() == 5);
  CHECK(ids[0] == "1");
  CHECK(ids[1] == "\"two\"");
  CHECK(Contains(ids[2], "507f1f77bcf86cd799439011"));

  // A document without _id gets an ObjectId, echoed.
  Run gen = MustRun({"insert", db, "--echo", "-c", "other"}, "{\"x\": 1}\n");
  CHECK(Contains(gen.out, "$oid"));
  CHECK(CountOf(db, "{}", "other") == 1);

  Run g1 = MustRun({"get", db, "1"});
  CHECK(Lines(g1.out).size() == 1);
  CHECK(Contains(g1.out, "\"ada\""));
  // A JSON string, and a bare word taken as a string.
  CHECK(Contains(MustRun({"get", db, "\"two\""}).out, "\"bob\""));
  CHECK(Contains(MustRun({"get", db, "two"}).out, "\"bob\""));
  Run oid = MustRun({"get", db, R"({"$oid": "507f1f77bcf86cd799439011"})"});
  CHECK(Contains(oid.out, "2011-03-01"));

  CHECK(CountOf(db) == 5);
  CHECK(CountOf(db, R"({"age": {"$gt": 36}})") == 1);

  Run all = MustRun({"find", db});
  CHECK(Lines(all.out).size() == 5);
  Run sorted =
      MustRun({"find", db, R"({"age": {"$exists": true}})", "--sort=-age", "--project", "name"});
  std::vector<std::string> lines = Lines(sorted.out);
  REQUIRE(lines.size() == 2);
  CHECK(Contains(lines[0], "bob"));
  CHECK(Contains(lines[1], "ada"));
  CHECK_FALSE(Contains(sorted.out, "tags"));
  Run colon = MustRun({"find", db, "{}", "--sort", "age:-1", "--limit", "1"});
  REQUIRE(Lines(colon.out).size() == 1);
  CHECK(Contains(colon.out, "bob"));
  Run dash = MustRun({"find", db, "{}", "--sort", "-age", "--limit", "1"});
  CHECK(Contains(dash.out, "bob"));
  Run skip = MustRun({"find", db, "{}", "--sort", "age", "--skip", "4"});
  CHECK(Lines(skip.out).size() == 1);

  Run explain = MustRun({"find", db, R"({"name": "ada"})", "--explain"});
  CHECK(Contains(explain.out, "COLLSCAN"));
  MustRun({"index", "create", db, "name"});
  explain = MustRun({"find", db, R"({"name": "ada"})", "--explain"});
  CHECK(Contains(explain.out, "IXSCAN"));

  ExpectError(RunTool({"find", db, "{}", "--sort", "age:sideways"}), 2, {"sort"});
  // Found by an outside test: these ran on a field no document has, or
  // (-age:-1) ascending.
  for (const char* bad : {"--age", "age:-1:1", "{}", "-age:-1", "{\"age\": 1}"}) {
    ExpectError(RunTool({"find", db, "{}", std::string("--sort=") + bad}), 2, {"sort"});
  }
  ExpectCheckOk(db);
}

TEST_CASE("tool: find --sort with several keys, and an index-backed sort", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 1, \"a\": 2, \"b\": \"x\"}\n{\"_id\": 2, \"a\": 1, \"b\": \"y\"}\n"
          "{\"_id\": 3, \"a\": 2, \"b\": \"z\"}\n{\"_id\": 4, \"a\": 1, \"b\": \"w\"}\n");
  auto ids = [](const std::string& out) {
    std::string s;
    for (const std::string& line : Lines(out)) s += line.substr(line.find(':') + 2, 1);
    return s;
  };
  CHECK(ids(MustRun({"find", db, "{}", "--sort", "a,-b"}).out) == "2431");
  CHECK(ids(MustRun({"find", db, "{}", "--sort=-a,b:1"}).out) == "1342");
  CHECK(ids(MustRun({"find", db, "{}", "--sort", "a,b", "--limit", "2"}).out) == "42");
  ExpectError(RunTool({"find", db, "{}", "--sort", "a,"}), 2, {"sort"});
  ExpectError(RunTool({"find", db, "{}", "--sort", "a,-a"}), 2, {"sort"});
  // An in-memory sort past --max-sort-bytes fails; a limit holds less.
  ExpectError(RunTool({"find", db, "{}", "--sort", "b", "--max-sort-bytes", "300"}), 2,
              {"sort exceeded memory limit of 300 bytes"});
  CHECK(ids(MustRun({"find", db, "{}", "--sort", "b", "--max-sort-bytes", "300", "--limit", "1"})
                .out) == "4");
  CHECK(Lines(MustRun({"find", db, "{}", "--sort", "b", "--max-sort-bytes", "0"}).out).size() == 4);
  ExpectError(RunTool({"find", db, "{}", "--max-sort-bytes", "-1"}), 2, {"--max-sort-bytes"});
  Run scan = MustRun({"find", db, "{}", "--sort", "a", "--explain"});
  CHECK(Contains(scan.out, "\"sortedInMemory\": true"));
  MustRun({"index", "create", db, "a"});
  Run walk = MustRun({"find", db, "{}", "--sort", "-a", "--limit", "1", "--explain"});
  CHECK(Contains(walk.out, "\"plan\": \"IXSCAN\""));
  CHECK(Contains(walk.out, "\"sortedInMemory\": false"));
  CHECK(Contains(walk.out, "\"docsExamined\": 1"));
  Run id = MustRun({"find", db, "{}", "--sort", "-_id", "--limit", "1"});
  CHECK(ids(id.out) == "4");
  ExpectCheckOk(db);
}

TEST_CASE("tool: distinct prints one JSON value per line", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 1, \"t\": [\"b\", 1]}\n{\"_id\": 2, \"t\": 1.0}\n{\"_id\": 3}\n"
          "{\"_id\": 4, \"t\": \"a\", \"k\": 1}\n{\"_id\": 5, \"t\": null}\n");
  CHECK(Lines(MustRun({"distinct", db, "t"}).out) ==
        std::vector<std::string>{"null", "1", "\"a\"", "\"b\""});
  CHECK(Lines(MustRun({"distinct", db, "t", R"({"k": 1})"}).out) ==
        std::vector<std::string>{"\"a\""});
  CHECK(MustRun({"distinct", db, "nothing"}).out.empty());
  ExpectError(RunTool({"distinct", db, "a..b"}), 2, {"distinct"});
  ExpectError(RunTool({"distinct", db}), 2, {});
  ExpectCheckOk(db);
}

TEST_CASE("tool: get of a missing id exits 1", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  ExpectError(RunTool({"get", db, "2"}), 1, {"2"});
  ExpectError(RunTool({"get", db, "1", "-c", "nope"}), 1, {"nope"});
  ExpectError(RunTool({"get", db, "{\"$oid\": "}), 2, {"invalid JSON"});
}

TEST_CASE("tool: get takes a bare word as a string, and refuses what no _id can be", "[tools]") {
  // Found by an independent test: `get n` returned the document with _id
  // 0, `get 1e400` looked up the string, `get '{"$foo": 1}'` looked up a
  // document by equality and invalid UTF-8 was reported as _id null.
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 0}\n{\"_id\": \"n\"}\n{\"_id\": \"1e400\"}\n{\"_id\": \"3f2a-x\"}\n");
  CHECK(MustRun({"get", db, "n"}).out == "{ \"_id\" : \"n\" }\n");
  CHECK(MustRun({"get", db, "3f2a-x"}).out == "{ \"_id\" : \"3f2a-x\" }\n");
  CHECK(MustRun({"get", db, "\"1e400\""}).out == "{ \"_id\" : \"1e400\" }\n");
  CHECK(MustRun({"get", db, "-0"}).out == "{ \"_id\" : 0 }\n");
  ExpectError(RunTool({"get", db, "N"}), 1, {"\"N\""});
  ExpectError(RunTool({"get", db, "1e400"}), 2, {"1e400", "out of range"});
  ExpectError(RunTool({"get", db, "9223372036854775808"}), 2, {"out of range (int64)"});
  ExpectError(RunTool({"get", db, "{\"$foo\": 1}"}), 2, {"$foo", "operator"});
  ExpectError(RunTool({"get", db, "{\"$gt\": -1}"}), 2, {"$gt", "operator"});
  ExpectError(RunTool({"get", db, "\xff"}), 2, {"UTF-8"});
  // Found by an outside test: 007 said "invalid JSON ... position 7", and
  // an array (which no _id is) said "not found".
  ExpectError(RunTool({"get", db, "007"}), 2, {"leading zero", "'\"007\"'"});
  ExpectError(RunTool({"get", db, "[1]"}), 2, {"cannot be an array"});
  // NaN and Infinity are not JSON: bare words, so strings (found by an
  // outside test: they looked up the doubles); the double is named as such.
  MustRun({"insert", db},
          "{\"_id\": \"NaN\"}\n{\"_id\": \"-Infinity\"}\n"
          "{\"_id\": {\"$numberDouble\": \"NaN\"}, \"d\": 1}\n");
  CHECK(MustRun({"get", db, "NaN"}).out == "{ \"_id\" : \"NaN\" }\n");
  CHECK(MustRun({"get", db, "--", "-Infinity"}).out == "{ \"_id\" : \"-Infinity\" }\n");
  CHECK(MustRun({"get", db, "{\"$numberDouble\": \"NaN\"}"}).out ==
        "{ \"_id\" : { \"$numberDouble\" : \"NaN\" }, \"d\" : 1 }\n");
  ExpectError(RunTool({"get", db, "Infinity"}), 1, {"\"Infinity\""});
}

TEST_CASE("tool: invalid JSON on line K keeps what came before", "[tools]") {
  for (const char* batch : {"1", "2", "100"}) {
    SECTION(std::string("batch ") + batch) {
      TempDir dir;
      const std::string db = dir.File("t.mmdb");
      Run r = RunTool({"insert", db, "--batch", batch, "--echo"},
                      "{\"_id\": 1}\n\n{\"_id\": 2}\n{\"_id\": 3, oops}\n"
                      "{\"_id\": 4}\n");
      ExpectError(r, 2, {"line 4", "invalid JSON"});
      // Lines before K are committed (and echoed), nothing after.
      CHECK(Lines(r.out) == std::vector<std::string>{"1", "2"});
      CHECK(CountOf(db) == 2);
      CHECK(RunTool({"get", db, "4"}).status == 1);
      ExpectCheckOk(db);
    }
  }
}

TEST_CASE("tool: bad input to insert", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  ExpectError(RunTool({"insert", db}, "[1, 2]\n"), 2, {"line 1"});
  ExpectError(RunTool({"insert", db}, "{\"$set\": 1}\n"), 2, {"line 1"});
  ExpectError(RunTool({"insert", db}, "{\"a\": \"\xff\xfe\"}\n"), 2, {"line 1"});
  std::string deep;
  for (int i = 0; i < 150; ++i) deep += "{\"a\": ";
  deep += "1";
  for (int i = 0; i < 150; ++i) deep += "}";
  ExpectError(RunTool({"insert", db}, "{\"_id\": 0}\n" + deep + "\n"), 2, {"line 2"});
  CHECK(CountOf(db) == 1);
  ExpectCheckOk(db);
}

TEST_CASE("tool: duplicate _id and unique-index violations", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": \"k1\", \"email\": \"a@x\"}\n");
  Run dup = RunTool({"insert", db},
                    "{\"_id\": \"k2\", \"email\": \"b@x\"}\n"
                    "{\"_id\": \"k1\", \"email\": \"c@x\"}\n");
  ExpectError(dup, 2, {"line 2", "duplicate _id", "k1"});
  CHECK(CountOf(db) == 2);

  MustRun({"index", "create", db, "email", "--unique"});
  Run uniq = RunTool({"insert", db, "--batch", "10"},
                     "{\"_id\": \"k3\", \"email\": \"d@x\"}\n"
                     "{\"_id\": \"k4\", \"email\": \"a@x\"}\n");
  ExpectError(uniq, 2, {"line 2", "unique", "a@x"});
  CHECK(CountOf(db) == 3);
  CHECK(RunTool({"get", db, "k4"}).status == 1);

  // A unique index cannot be built over duplicates; nothing is left.
  MustRun({"insert", db, "-c", "u"}, "{\"_id\": \"k5\", \"n\": 7}\n{\"_id\": \"k6\", \"n\": 7}\n");
  ExpectError(RunTool({"index", "create", db, "n", "--unique", "-c", "u"}), 2, {"n", "7"});
  CHECK(MustRun({"index", "list", db, "-c", "u"}).out.empty());
  Run list = MustRun({"index", "list", db});
  CHECK(Contains(list.out, "email"));
  CHECK_FALSE(Contains(list.out, "\"n\""));
  // In an array, the element that collides is named, not the array.
  MustRun({"insert", db, "-c", "m"}, "{\"_id\": 1, \"t\": [\"p\", \"<q>\"]}\n");
  MustRun({"index", "create", db, "t", "--unique", "-c", "m"});
  Run elem = RunTool({"insert", db, "-c", "m"}, "{\"_id\": 2, \"t\": [\"r\", \"<q>\"]}\n");
  ExpectError(elem, 2, {"unique index 't'", "\"<q>\""});
  CHECK_FALSE(Contains(elem.err, "\"r\""));
  MustRun({"insert", db, "-c", "m2"},
          "{\"_id\": 1, \"t\": [5, 6]}\n{\"_id\": 2, \"t\": [7, 6.0]}\n");
  Run build = RunTool({"index", "create", db, "t", "--unique", "-c", "m2"});
  ExpectError(build, 2, {"duplicate value: 6"});
  CHECK_FALSE(Contains(build.err, "7"));
  ExpectCheckOk(db);
}

TEST_CASE("tool: bad filters and updates", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1}\n");
  ExpectError(RunTool({"find", db, "{bad"}), 2, {"filter", "invalid JSON"});
  ExpectError(RunTool({"find", db, R"({"a": {"$frob": 1}})"}), 2, {"$frob"});
  ExpectError(RunTool({"count", db, "not json"}), 2, {"filter"});
  ExpectError(RunTool({"delete", db, "{"}), 2, {"filter"});
  ExpectError(RunTool({"update", db, "{}", "{oops"}), 2, {"update"});
  ExpectError(RunTool({"update", db, "{}", R"({"$frob": {"a": 1}})"}), 2, {"$frob"});
  CHECK(Contains(MustRun({"get", db, "1"}).out, "\"a\""));
  ExpectCheckOk(db);
}

TEST_CASE("tool: update, delete, index drop and list", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 1, \"n\": 1}\n{\"_id\": 2, \"n\": 1}\n"
          "{\"_id\": 3, \"n\": 2}\n");
  MustRun({"index", "create", db, "n"});
  Run one = MustRun({"update", db, R"({"n": 1})", R"({"$inc": {"n": 10}})"});
  CHECK(Contains(one.out, "\"matched\": 1"));
  Run many = MustRun({"update", db, "{}", R"({"$set": {"tag": "t"}})", "--many"});
  CHECK(Contains(many.out, "\"matched\": 3"));
  CHECK(Contains(many.out, "\"modified\": 3"));
  CHECK(CountOf(db, R"({"tag": "t"})") == 3);

  Run del = MustRun({"delete", db, R"({"n": {"$lt": 5}})", "--many"});
  CHECK(Contains(del.out, "\"deleted\": 2"));
  CHECK(CountOf(db) == 1);

  Run list = MustRun({"index", "list", db});
  CHECK(Contains(list.out, "\"n\""));
  CHECK(Contains(list.out, "\"entries\""));
  MustRun({"index", "drop", db, "n"});
  CHECK(MustRun({"index", "list", db}).out.empty());
  ExpectError(RunTool({"index", "drop", db, "n"}), 1, {"index drop", "n"});
  ExpectCheckOk(db);
}

TEST_CASE("tool: update --upsert inserts when nothing matches", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");  // created by the upsert
  Run ins = MustRun({"update", db, R"({"_id": 7, "k": "a", "n": {"$gt": 1}})",
                     R"({"$set": {"v": 1}, "$setOnInsert": {"born": true}})", "--upsert"});
  CHECK(Lines(ins.out) ==
        std::vector<std::string>{R"({"matched": 0, "modified": 0, "upserted": 7})"});
  Run got = MustRun({"get", db, "7"});
  CHECK(Contains(got.out, "\"k\""));
  CHECK(Contains(got.out, "\"born\""));
  CHECK_FALSE(Contains(got.out, "\"n\""));
  // Matching now: an update; $setOnInsert does nothing.
  Run upd = MustRun({"update", db, R"({"_id": 7})",
                     R"({"$inc": {"v": 1}, "$setOnInsert": {"born": false}})", "--upsert"});
  CHECK(Lines(upd.out) == std::vector<std::string>{R"({"matched": 1, "modified": 1})"});
  CHECK(CountOf(db, R"({"v": 2, "born": true})") == 1);
  // A generated ObjectId, and the array operators.
  Run oid =
      MustRun({"update", db, R"({"k": "b"})", R"({"$push": {"t": {"$each": [3, 1], "$sort": 1}}})",
               "--upsert", "--many", "-c", "other"});
  CHECK(Contains(oid.out, R"("upserted": {)"));
  CHECK(Contains(oid.out, "$oid"));
  CHECK(CountOf(db, R"({"k": "b", "t.0": 1, "t.1": 3})", "other") == 1);
  // Errors: exit 2, one line naming the field, nothing inserted.
  ExpectError(RunTool({"update", db, R"({"a": 1})", R"({"$push": {"a": 2}})", "--upsert"}), 2,
              {"update", "non-array field: a"});
  ExpectError(RunTool({"update", db, "{}", R"({"$bit": {"a": {"and": 1}}})", "--upsert"}), 2,
              {"$bit"});
  CHECK(CountOf(db) == 1);
  // Without --upsert a missing database is not created.
  const std::string missing = dir.File("missing.mmdb");
  CHECK(RunTool({"update", missing, "{}", R"({"$set": {"a": 1}})"}).status != 0);
  CHECK(RunTool({"get", missing, "1"}).status != 0);
  CHECK(Contains(MustRun({"update", "--help"}).out, "--upsert"));
  ExpectCheckOk(db);
}

TEST_CASE("tool: locked database", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  auto held = DB::Open(db);
  REQUIRE(held.ok());
  ExpectError(RunTool({"get", db, "1"}), 2, {"lock"});
  ExpectError(RunTool({"insert", db}, "{\"_id\": 2}\n"), 2, {"lock"});
  ExpectError(RunTool({"check", db}), 2, {"lock"});
  held.value().reset();
  CHECK(CountOf(db) == 1);
}

TEST_CASE("tool: paths that are directories or missing", "[tools]") {
  TempDir dir;
  ExpectError(RunTool({"insert", dir.path()}, "{}\n"), 2, {"directory"});
  ExpectError(RunTool({"get", dir.path(), "1"}), 2, {"directory"});
  ExpectError(RunTool({"check", dir.path()}), 2, {"directory"});
  ExpectError(RunTool({"find", dir.File("missing.mmdb")}), 2, {"no such database"});
  struct stat st;
  CHECK(stat(dir.File("missing.mmdb").c_str(), &st) != 0);  // not created
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  ExpectError(RunTool({"import", db, dir.path()}), 2, {"directory"});
  ExpectError(RunTool({"import", db, dir.File("nope.json")}), 2, {"nope.json"});
  ExpectError(RunTool({"export", db, "-o", dir.path()}), 2, {"directory"});
}

TEST_CASE("tool: import of empty, binary and malformed files", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 0}\n");
  // Nothing to import is not an error (found by an outside test: the export
  // of an empty collection could not be imported); the collection is made.
  WriteFile(dir.File("empty.json"), "");
  MustRun({"import", db, dir.File("empty.json")});
  WriteFile(dir.File("blank.json"), "\n  \n");
  MustRun({"import", db, dir.File("blank.json"), "-c", "blank"});
  WriteFile(dir.File("empty.bson"), "");
  MustRun({"import", db, dir.File("empty.bson"), "-c", "e"});
  CHECK(MustRun({"count", db, "-c", "e"}).out == "0\n");
  CHECK(MustRun({"count", db, "-c", "blank"}).out == "0\n");
  // More blanks than the format sniff reads, then documents or garbage
  // (found by an outside test: both imported nothing and exited 0).
  WriteFile(dir.File("spaced.json"), std::string(10000, ' ') + "{\"_id\": 1}\n");
  MustRun({"import", db, dir.File("spaced.json"), "-c", "spaced"});
  CHECK(MustRun({"count", db, "-c", "spaced"}).out == "1\n");
  WriteFile(dir.File("spaced-bom.json"),
            "\xEF\xBB\xBF" + std::string(5000, '\n') + "[{\"_id\": 2}]");
  MustRun({"import", db, dir.File("spaced-bom.json"), "-c", "spaced"});
  CHECK(MustRun({"count", db, "-c", "spaced"}).out == "2\n");
  WriteFile(dir.File("spaced-bad.json"), std::string(5000, '\n') + "not json\n");
  for (const char* format : {"auto", "json"}) {
    ExpectError(
        RunTool({"import", db, dir.File("spaced-bad.json"), "-c", "spaced", "--format", format}), 2,
        {"spaced-bad.json"});
  }
  CHECK(MustRun({"count", db, "-c", "spaced"}).out == "2\n");
  WriteFile(dir.File("empty-array.json"), "[]");
  MustRun({"import", db, dir.File("empty-array.json"), "-c", "arr"});
  MustRun({"stats", db, "-c", "arr"});  // exit 1 when there is no such collection
  CHECK(MustRun({"count", db}).out == "1\n");
  const std::string copy = dir.File("copy.mmdb");
  MustRun({"export", db, "-c", "e", "-o", dir.File("e.json")});
  MustRun({"import", copy, dir.File("e.json"), "-c", "e"});
  CHECK(MustRun({"count", copy, "-c", "e"}).out == "0\n");
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>((i * 7919 + 13) % 256));
  binary[0] = '\x89';
  binary[4] = '\x42';  // not a BSON type
  WriteFile(dir.File("image.png"), binary);
  ExpectError(RunTool({"import", db, dir.File("image.png")}), 2, {"image.png", "neither JSON"});
  // Text that is not documents is named by its first character, not called
  // binary (found by an outside test).
  WriteFile(dir.File("five.json"), "5\n");
  ExpectError(RunTool({"import", db, dir.File("five.json")}), 2,
              {"five.json", "not JSON documents", "starts with '5'"});
  WriteFile(dir.File("boms.json"), "\xEF\xBB\xBF\xEF\xBB\xBF{}");
  ExpectError(RunTool({"import", db, dir.File("boms.json")}), 2,
              {"boms.json", "a second byte order mark"});
  WriteFile(dir.File("array.json"), "[1, 2]\n");  // an array, but not of documents
  ExpectError(RunTool({"import", db, dir.File("array.json")}), 2,
              {"array.json", "document 1", "expected a document"});
  WriteFile(dir.File("bad.json"), "{\"_id\": 1}\n{\"_id\": 2}\n{\"_id\"\n");
  ExpectError(RunTool({"import", db, dir.File("bad.json")}), 2,
              {"bad.json", "line 3", "invalid JSON"});
  CHECK(CountOf(db) == 3);  // 0, 1, 2
  // A .bson file cut short in its second document.
  bson_t* doc = BCON_NEW("_id", BCON_INT32(10));
  std::string one(reinterpret_cast<const char*>(bson_get_data(doc)), doc->len);
  bson_destroy(doc);
  WriteFile(dir.File("cut.bson"), one + one.substr(0, one.size() - 3));
  ExpectError(RunTool({"import", db, dir.File("cut.bson")}), 2,
              {"cut.bson", "document 2", "truncated"});
  CHECK(RunTool({"get", db, "10"}).status == 0);  // the first one stays
  ExpectCheckOk(db);
}

// Runs the tool with `input` written into a pipe on its standard input;
// its exit status.
int RunWithPipe(const std::string& args, const std::string& input) {
  FILE* p = popen((ToolPath() + " " + args + " 2>/dev/null").c_str(), "w");
  REQUIRE(p != nullptr);
  std::fwrite(input.data(), 1, input.size(), p);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("tool: import reads a pipe, standard input and a FIFO", "[tools]") {
  // The format sniff reads the start of the input; a stream cannot be read
  // again, so it once imported nothing and exited 0.
  TempDir dir;
  const std::string db = dir.File("p.mmdb");
  CHECK(RunWithPipe("import " + db + " -", "{\"_id\": 1}\n{\"_id\": 2}\n") == 0);
  CHECK(RunWithPipe("import " + db + " /dev/stdin", "{\"_id\": 3}\n") == 0);
  CHECK(CountOf(db) == 3);
  CHECK(RunWithPipe("import " + db + " -", "{this is not json}\n") == 2);
  CHECK(RunWithPipe("import " + db + " -", "") == 0);  // empty, as an empty file
  std::string many;
  for (int i = 100; i < 5100; i++) many += "{\"_id\": " + std::to_string(i) + "}\n";
  CHECK(RunWithPipe("import " + db + " -", many) == 0);  // more than the sniffed head
  CHECK(CountOf(db) == 5003);
  const std::string fifo = dir.File("in.fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] {
    std::ofstream out(fifo);
    out << "{\"_id\": \"fifo\"}\n";
  });
  Run r = RunTool({"import", db, fifo});
  writer.join();
  CHECK(r.status == 0);
  CHECK(CountOf(db) == 5004);
  ExpectCheckOk(db);
}

// Splits concatenated BSON with libbson's reader (as bsondump would).
std::vector<std::string> ReadBsonFile(const std::string& path) {
  std::vector<std::string> docs;
  bson_error_t error;
  bson_reader_t* reader = bson_reader_new_from_file(path.c_str(), &error);
  REQUIRE(reader != nullptr);
  const bson_t* b;
  bool eof = false;
  while ((b = bson_reader_read(reader, &eof)) != nullptr) {
    REQUIRE(bson_validate(b, BSON_VALIDATE_NONE, nullptr));
    docs.emplace_back(reinterpret_cast<const char*>(bson_get_data(b)), b->len);
  }
  CHECK(eof);
  bson_reader_destroy(reader);
  return docs;
}

TEST_CASE("tool: export and import round trip", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("src.mmdb");
  MustRun({"insert", db}, kMixedDocs);
  MustRun({"index", "create", db, "name"});

  SECTION("json") {
    Run exp = MustRun({"export", db});
    std::vector<std::string> lines = Lines(exp.out);
    REQUIRE(lines.size() == 5);
    for (const std::string& line : lines) {  // every line parses as JSON
      bson_error_t error;
      bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(line.data()),
                                     static_cast<ssize_t>(line.size()), &error);
      CHECK(b != nullptr);
      if (b) bson_destroy(b);
    }
    MustRun({"export", db, "-o", dir.File("dump.json"), "--format", "json"});
    CHECK(ReadFile(dir.File("dump.json")) == exp.out);
    const std::string copy = dir.File("copy.mmdb");
    MustRun({"import", copy, dir.File("dump.json")});
    CHECK(MustRun({"export", copy}).out == exp.out);
    ExpectCheckOk(copy);
  }
  SECTION("bson") {
    MustRun({"export", db, "--format", "bson", "-o", dir.File("dump.bson")});
    std::vector<std::string> docs = ReadBsonFile(dir.File("dump.bson"));
    CHECK(docs.size() == 5);
    // By extension, and by content under another name.
    const std::string copy = dir.File("copy.mmdb");
    MustRun({"import", copy, dir.File("dump.bson")});
    std::rename(dir.File("dump.bson").c_str(), dir.File("dump.data").c_str());
    const std::string copy2 = dir.File("copy2.mmdb");
    MustRun({"import", copy2, dir.File("dump.data"), "-c", "c2"});
    MustRun({"export", copy, "--format", "bson", "-o", dir.File("again.bson")});
    CHECK(ReadBsonFile(dir.File("again.bson")) == docs);
    CHECK(MustRun({"export", copy}).out == MustRun({"export", db}).out);
    CHECK(MustRun({"export", copy2, "-c", "c2"}).out == MustRun({"export", db}).out);
    ExpectCheckOk(copy);
    ExpectCheckOk(copy2);
  }
  ExpectError(RunTool({"export", db, "-c", "nope"}), 1, {"nope"});
}

// One document of every BSON type whose JSON is delicate, built with
// libbson so that the types are exactly these whatever the JSON reader does.
std::string EveryTypeBson(int id) {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT32(&b, "_id", id);
  BSON_APPEND_INT32(&b, "i32", -2147483647 - 1);
  BSON_APPEND_INT64(&b, "i64small", 5);
  BSON_APPEND_INT64(&b, "i64big", 9007199254740993LL);
  const double doubles[] = {5.0,
                            9.99,
                            0.1,
                            1e300,
                            -0.0,
                            std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            5e-324,
                            123456789012345680000.0};
  bson_t arr;
  BSON_APPEND_ARRAY_BEGIN(&b, "doubles", &arr);
  for (size_t i = 0; i < sizeof(doubles) / sizeof(doubles[0]); ++i) {
    BSON_APPEND_DOUBLE(&arr, std::to_string(i).c_str(), doubles[i]);
  }
  bson_append_array_end(&b, &arr);
  bson_decimal128_t dec;
  bson_decimal128_from_string("1234.5670", &dec);
  BSON_APPEND_DECIMAL128(&b, "dec", &dec);
  BSON_APPEND_DATE_TIME(&b, "before1970", -62135596800000LL);
  BSON_APPEND_DATE_TIME(&b, "after9999", 253402300800001LL);
  BSON_APPEND_DATE_TIME(&b, "now", 1500000000123LL);
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, "5f1a2b3c4d5e6f7081920a1b");
  BSON_APPEND_OID(&b, "oid", &oid);
  const uint8_t bytes[] = {0, 1, 2, 0xff};
  BSON_APPEND_BINARY(&b, "bin", BSON_SUBTYPE_BINARY, bytes, 4);
  BSON_APPEND_BINARY(&b, "uuid", BSON_SUBTYPE_UUID, bytes, 4);
  BSON_APPEND_REGEX(&b, "re", "^a\"b/c\\d", "imx");
  BSON_APPEND_TIMESTAMP(&b, "ts", 4294967295u, 7);
  BSON_APPEND_MINKEY(&b, "min");
  BSON_APPEND_MAXKEY(&b, "max");
  bson_t sub, inner;
  BSON_APPEND_DOCUMENT_BEGIN(&b, "nested", &sub);
  BSON_APPEND_ARRAY_BEGIN(&sub, "a", &inner);
  BSON_APPEND_INT64(&inner, "0", 1);
  BSON_APPEND_DOUBLE(&inner, "1", 2.0);
  BSON_APPEND_UTF8(&inner, "2", "t\u00e9\tx");
  bson_append_array_end(&sub, &inner);
  BSON_APPEND_DOCUMENT_BEGIN(&sub, "d", &inner);
  BSON_APPEND_INT64(&inner, "deep", -1);
  bson_append_document_end(&sub, &inner);
  bson_append_document_end(&b, &sub);
  std::string out(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return out;
}

TEST_CASE("tool: export --json-mode canonical round-trips every type exactly", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("src.mmdb");
  WriteFile(dir.File("src.bson"), EveryTypeBson(1) + EveryTypeBson(2));
  MustRun({"import", db, dir.File("src.bson")});
  MustRun({"export", db, "--format", "bson", "-o", dir.File("src-again.bson")});
  const std::vector<std::string> original = ReadBsonFile(dir.File("src-again.bson"));
  REQUIRE(original == ReadBsonFile(dir.File("src.bson")));

  // canonical: export, import into a new database, export again.
  MustRun({"export", db, "--json-mode", "canonical", "-o", dir.File("c.json")});
  const std::string canonical = ReadFile(dir.File("c.json"));
  CHECK(Lines(canonical).size() == 2);
  CHECK(Contains(canonical, R"("i64small" : { "$numberLong" : "5" })"));
  CHECK(Contains(canonical, R"({ "$numberDouble" : "9.99" })"));
  CHECK(
      Contains(canonical, R"("after9999" : { "$date" : { "$numberLong" : "253402300800001" } })"));
  const std::string copy = dir.File("copy.mmdb");
  MustRun({"import", copy, dir.File("c.json")});
  MustRun({"export", copy, "--format", "bson", "-o", dir.File("copy.bson")});
  CHECK(ReadBsonFile(dir.File("copy.bson")) == original);  // byte-identical BSON
  CHECK(MustRun({"export", copy, "--json-mode", "canonical"}).out == canonical);
  ExpectCheckOk(copy);

  // relaxed (the default, as mongoexport's): readable, shortest doubles,
  // and a small int64 comes back as int32, as MongoDB's rule has it.
  Run relaxed = MustRun({"export", db});
  CHECK(MustRun({"export", db, "--json-mode", "relaxed"}).out == relaxed.out);
  CHECK(Contains(relaxed.out, R"("i64small" : 5,)"));
  CHECK(Contains(relaxed.out, R"("doubles" : [ 5.0, 9.99, 0.1, 1e+300, -0.0, )"));
  CHECK_FALSE(Contains(relaxed.out, "9.9900000000000002132"));
  CHECK(Contains(relaxed.out, R"("now" : { "$date" : "2017-07-14T02:40:00.123Z" })"));
  WriteFile(dir.File("r.json"), relaxed.out);
  const std::string lossy = dir.File("lossy.mmdb");
  MustRun({"import", lossy, dir.File("r.json")});
  CHECK(CountOf(lossy, R"({"i64small": {"$type": "int"}})") == 2);
  CHECK(CountOf(lossy, R"({"i64big": {"$type": "long"}, "doubles.1": 9.99})") == 2);

  // find and get print the same way.
  CHECK(MustRun({"find", db, "{}", "--json-mode", "canonical"}).out == canonical);
  CHECK(MustRun({"get", db, "1", "--json-mode", "canonical"}).out == Lines(canonical)[0] + "\n");
  CHECK(MustRun({"get", db, "1"}).out == Lines(relaxed.out)[0] + "\n");
  CHECK(Contains(MustRun({"export", db, "--salvage", "--json-mode", "canonical"}).out,
                 "$numberLong"));
  for (const char* cmd : {"get", "find", "export"}) {
    CHECK(Contains(MustRun({cmd, "--help"}).out, "--json-mode"));
    ExpectError(RunTool({cmd, db, "--json-mode", "loose"}), 2, {"--json-mode"});
  }
}

TEST_CASE("tool: import reads JSON arrays, pretty-printed documents and a BOM", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  // mongoexport --jsonArray --pretty, with a byte order mark.
  WriteFile(dir.File("array.json"),
            "\xEF\xBB\xBF[\n  {\n    \"_id\": 1,\n    \"s\": \"} { [\\\" ]\"\n  },\n"
            "  {\"_id\": 2, \"a\": [{\"b\": 1}, []]}\n]\n");
  MustRun({"import", db, dir.File("array.json")});
  CHECK(CountOf(db) == 2);
  CHECK(Contains(MustRun({"get", db, "1"}).out, R"("s" : "} { [\" ]")"));
  // Pretty-printed documents one after another (mongosh, jq), and two on a line.
  WriteFile(dir.File("pretty.json"),
            "{\n  \"_id\": 3,\n  \"n\": {\n    \"x\": [\n      1,\n      2\n    ]\n  }\n}\n"
            "\n{\"_id\": 4}{\"_id\": 5}\n");
  MustRun({"import", db, dir.File("pretty.json")});
  CHECK(CountOf(db, R"({"n.x": 2})") == 1);
  CHECK(CountOf(db) == 5);
  // JSON lines with a byte order mark, and --json-array (or --jsonArray).
  WriteFile(dir.File("bom.json"), "\xEF\xBB\xBF{\"_id\": 6}\n{\"_id\": 7}\n");
  MustRun({"import", db, dir.File("bom.json")});
  WriteFile(dir.File("flat.json"), "[{\"_id\": 8},{\"_id\": 9}]");
  MustRun({"import", db, dir.File("flat.json"), "--json-array"});
  WriteFile(dir.File("empty-array.json"), "[ ]\n");
  MustRun({"import", db, dir.File("empty-array.json"), "--jsonArray"});
  CHECK(CountOf(db) == 9);
  ExpectError(RunTool({"import", db, dir.File("bom.json"), "--json-array"}), 2,
              {"bom.json", "document 1 at line 1", "--json-array"});
  ExpectError(RunTool({"import", db, dir.File("flat.json"), "--json-array", "--format", "bson"}), 2,
              {"--json-array"});
  CHECK(CountOf(db) == 9);
  CHECK(Contains(MustRun({"import", "--help"}).out, "--json-array"));
  ExpectCheckOk(db);
}

TEST_CASE("tool: bad JSON in an array or a pretty-printed file: exit 2, one line", "[tools]") {
  struct Case {
    const char* name;
    std::string text;
    uint64_t kept;  // documents before the bad one
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"pretty.json",
       "{\n  \"_id\": 1\n}\n{\n  \"_id\": 2\n}\n{\n  \"_id\": 3,\n  oops\n}\n{\"_id\": 4}\n",
       2,
       {"document 3 at line 7", "invalid JSON"}},
      {"array.json",
       "[\n{\"_id\": 1},\n{\"_id\": 2},\n{\"_id\" 3},\n{\"_id\": 4}\n]\n",
       2,
       {"document 3 at line 4", "invalid JSON"}},
      {"element.json",
       "[{\"_id\": 1}, 2, {\"_id\": 3}]",
       1,
       {"document 2 at line 1", "expected a document", "'2'"}},
      {"comma.json", "[{\"_id\": 1} {\"_id\": 2}]", 1, {"document 2", "expected ',' or ']'"}},
      {"trailing.json", "[{\"_id\": 1},\n]", 1, {"document 2 at line 2", "']'"}},
      {"open.json", "[{\"_id\": 1},\n{\"_id\": 2}\n", 2, {"document 3 at line 3", "not closed"}},
      {"after.json", "[{\"_id\": 1}]\n{\"_id\": 2}\n", 1, {"after the end of the array"}},
      {"string.json",
       "{\"_id\": 1}\n{\"_id\": 2, \"s\": \"abc}\n{\"_id\": 3}\n",
       1,
       {"document 2 at line 2", "string is not closed"}},
      {"unclosed.json",
       "{\"_id\": 1}\n{\"_id\": 2,\n",
       1,
       {"document 2 at line 2", "invalid JSON", "not closed"}},
      {"dup.json", "[{\"_id\": 1},\n {\"_id\": 1}]", 1, {"document 2 at line 2", "duplicate _id"}},
      {"garbage.json", "{\"_id\": 1}\nhello\n", 1, {"document 2 at line 2", "'h'"}},
  };
  for (const Case& c : cases) {
    for (const char* batch : {"1", "1000"}) {
      INFO(c.name << " batch " << batch);
      TempDir dir;
      const std::string db = dir.File("t.mmdb");
      MustRun({"insert", db}, "{\"_id\": 0}\n");
      WriteFile(dir.File(c.name), c.text);
      std::vector<std::string> parts = c.parts;
      parts.push_back(c.name);
      ExpectError(RunTool({"import", db, dir.File(c.name), "--batch", batch}), 2, parts);
      CHECK(CountOf(db) == 1 + c.kept);  // exactly the documents before it
      ExpectCheckOk(db);
    }
  }
}

TEST_CASE("tool: import in batches of many documents", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  std::string json;
  const int n = 2500;
  for (int i = 0; i < n; ++i) {
    json += "{\"_id\": " + std::to_string(i) + ", \"v\": \"" + std::string(i % 50, 'x') + "\"}\n";
  }
  WriteFile(dir.File("many.json"), json);
  Run r = MustRun({"import", db, dir.File("many.json"), "--batch", "1000"});
  CHECK(r.err.empty());  // no progress bar: stderr is not a terminal
  CHECK(CountOf(db) == static_cast<uint64_t>(n));
  ExpectCheckOk(db);
}

TEST_CASE("tool: an answer lost to a full disk is an error, exit 2", "[tools]") {
  // Found by an independent test: `get DB 0 > /dev/full` exited 0, the
  // small answer lost in stdio's buffer at exit.
  TempDir dir;
  const std::string db = dir.File("o.mmdb");
  MustRun({"insert", db}, "{\"_id\": 0, \"a\": 1}\n");
  MustRun({"index", "create", db, "a"});  // so that `index list` has a line to print
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"get", db, "0"},
                                             {"count", db},
                                             {"find", db, "{}"},
                                             {"distinct", db, "a"},
                                             {"stats", db},
                                             {"check", db},
                                             {"index", "list", db},
                                             {"update", db, "{}", "{\"$set\": {\"a\": 2}}"}}) {
    INFO(args[0]);
    ExpectError(RunTool(args, "", "/dev/full"), 2, {"writing the output", "No space left"});
  }
  CHECK(MustRun({"get", db, "0"}).out == "{ \"_id\" : 0, \"a\" : 2 }\n");  // the update committed
}

TEST_CASE("tool: check, stats and compact on a good database", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  std::string json;
  for (int i = 0; i < 500; ++i) {
    json += "{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i % 10) +
            ", \"pad\": \"" + std::string(200, 'p') + "\"}\n";
  }
  MustRun({"insert", db, "--batch", "100", "--durability", "none"}, json);
  MustRun({"index", "create", db, "k"});
  ExpectCheckOk(db);

  Run stats = MustRun({"stats", db, "--json"});
  bson_error_t error;
  bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(stats.out.data()),
                                 static_cast<ssize_t>(stats.out.size()), &error);
  CHECK(b != nullptr);
  // The log's size is the file's, not its 64 MiB budget.
  bson_iter_t it;
  const uint64_t log_file = std::filesystem::file_size(db + "-log");
  CHECK(log_file < (8u << 20));
  CHECK((b && bson_iter_init_find(&it, b, "log_file_size") &&
         static_cast<uint64_t>(bson_iter_as_int64(&it)) == log_file));
  CHECK((b && bson_iter_init_find(&it, b, "log_size") && bson_iter_as_int64(&it) == 64 << 20));
  if (b) bson_destroy(b);
  Run table = MustRun({"stats", db});
  CHECK(Contains(table.out, "default"));
  CHECK(Contains(table.out, "fill factor"));
  CHECK(Contains(table.out, "log size      " + std::to_string(log_file) + " bytes"));

  MustRun({"delete", db, R"({"k": {"$ne": 0}})", "--many"});
  MustRun({"compact", db});
  CHECK(CountOf(db) == 50);
  ExpectCheckOk(db);

  // Both cover the whole database; a collection given with -c must exist
  // (exit 1 when it does not, nothing touched), not be silently ignored.
  MustRun({"check", db, "-c", "default"});
  MustRun({"compact", db, "-c", "default"});
  ExpectError(RunTool({"check", db, "-c", "other"}), 1, {"check", "no collection", "other"});
  ExpectError(RunTool({"compact", db, "-c", "other"}), 1, {"compact", "no collection", "other"});
  CHECK(CountOf(db) == 50);
}

TEST_CASE("tool: check and export --salvage on a damaged file", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  std::string json;
  for (int i = 0; i < 400; ++i) {
    json += "{\"_id\": " + std::to_string(i) + ", \"pad\": \"" + std::string(300, 'p') + "\"}\n";
  }
  MustRun({"insert", db, "--batch", "400"}, json);
  ExpectCheckOk(db);
  // Damage pages 10 to 14 of about 40 in use (the file itself is larger,
  // preallocated); the tool has closed the database, so everything is
  // checkpointed into the file.
  struct stat st;
  REQUIRE(stat(db.c_str(), &st) == 0);
  REQUIRE(st.st_size >= 15 * 4096);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    for (off_t off = 10 * 4096; off < 15 * 4096; off += 512) {
      f.seekp(off);
      f.write("\xde\xad\xbe\xef", 4);
    }
  }
  Run check = RunTool({"check", db});
  INFO(Show(check));
  CHECK(check.status == 1);
  CHECK(Contains(check.out, "problem"));
  CHECK(Lines(check.err).size() == 1);

  // Plain export stops at the damage; --salvage goes on past it, writes
  // only intact documents, each once, and says how many it could not read.
  Run plain = RunTool({"export", db});
  CHECK(plain.status == 2);
  CHECK(Contains(plain.err, "--salvage"));
  Run salvage = RunTool({"export", db, "--salvage"});
  INFO(Show(salvage));
  CHECK(salvage.status == 1);
  CHECK(Lines(salvage.err).size() == 1);
  CHECK(Contains(salvage.err, "could not be read"));
  std::vector<std::string> lines = Lines(salvage.out);
  CHECK(lines.size() < 400);
  CHECK(lines.size() >= Lines(plain.out).size());
  std::set<std::string> unique(lines.begin(), lines.end());
  CHECK(unique.size() == lines.size());
  for (const std::string& line : lines) CHECK(Contains(line, std::string(300, 'p')));
  // The count of what was lost is exact: DB::Salvage knows the
  // collection's document count even when queries fail.
  unsigned long long wrote = 0;
  unsigned long long lost = 0;
  REQUIRE(std::sscanf(salvage.err.c_str(),
                      "mmdoc: export --salvage: wrote %llu documents; %llu "
                      "could not be read",
                      &wrote, &lost) == 2);
  CHECK(wrote == lines.size());
  CHECK(wrote + lost == 400);
  CHECK(Contains(salvage.err, "5 damaged page(s) skipped"));
}

// Found by an outside test: export -o FILE truncated FILE at once, so an
// export that then failed (a damaged page, a full disk) destroyed the older
// copy there, or left a partial one that passed for whole. FILE is now
// replaced only by a whole export.
TEST_CASE("tool: export -o replaces its file only with a whole export", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb"), out = dir.File("out.json");
  std::string json;
  for (int i = 0; i < 400; ++i) {
    json += "{\"_id\": " + std::to_string(i) + ", \"pad\": \"" + std::string(300, 'p') + "\"}\n";
  }
  MustRun({"insert", db, "--batch", "400"}, json);
  WriteFile(out, "an older export\n");
  REQUIRE(chmod(out.c_str(), 0640) == 0);
  MustRun({"export", db, "-o", out});
  CHECK(Lines(ReadFile(out)).size() == 400);
  struct stat st;
  REQUIRE(stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);  // the file's mode stays
  // A new file gets the umask's mode, as any file the tool makes.
  const std::string fresh = dir.File("fresh.json");
  const mode_t old_mask = umask(027);
  MustRun({"export", db, "-o", fresh});
  umask(old_mask);
  REQUIRE(stat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    for (off_t off = 10 * 4096; off < 15 * 4096; off += 512) {
      f.seekp(off);
      f.write("\xde\xad\xbe\xef", 4);
    }
  }
  WriteFile(out, "an older export\n");
  ExpectError(RunTool({"export", db, "-o", out}), 2, {"--salvage", "was left as it was"});
  CHECK(ReadFile(out) == "an older export\n");
  const std::string none = dir.File("none.json");
  ExpectError(RunTool({"export", db, "-o", none}), 2, {"was not written"});
  CHECK(!std::filesystem::exists(none));
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    CHECK(e.path().filename().string().find(".mmdoc-") == std::string::npos);  // no temp left
  }
}

// DB::Salvage reads what DB::Open accepts. A file neither of whose meta
// pages is valid does not open, so salvage says so (exit 2) and check
// reports a damaged database (exit 1).
TEST_CASE("tool: export --salvage of a file with both meta pages damaged", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    for (off_t page : {0, 1}) {  // past the magic: the checksums fail
      f.seekp(page * 4096 + 512);
      f.write("\xde\xad\xbe\xef", 4);
    }
  }
  ExpectError(RunTool({"export", db, "--salvage"}), 2, {"open", "meta page"});
  Run check = RunTool({"check", db});
  INFO(Show(check));
  CHECK(check.status == 1);
  CHECK(Lines(check.err).size() == 1);
}

// a negative --limit returned everything and a negative
// --skip nothing, both with exit 0.
TEST_CASE("tool: find refuses a negative --limit or --skip", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n{\"_id\": 2}\n");
  ExpectError(RunTool({"find", db, "--limit", "-1"}), 2, {"--limit", "-1"});
  ExpectError(RunTool({"find", db, "--limit=-5"}), 2, {"--limit", "-5"});
  ExpectError(RunTool({"find", db, "--skip", "-1"}), 2, {"--skip", "-1"});
  ExpectError(RunTool({"find", db, "--skip", "-1", "--explain"}), 2, {"--skip"});
  // Past int64: refused, not wrapped around.
  ExpectError(RunTool({"find", db, "--limit", "99999999999999999999"}), 2, {"--limit"});
  CHECK(Lines(MustRun({"find", db, "--limit", "1"}).out).size() == 1);
  CHECK(Lines(MustRun({"find", db, "--limit", "0"}).out).size() == 2);
  CHECK(Lines(MustRun({"find", db, "--skip", "1"}).out).size() == 1);
}

// --project '$a' printed {"_id": 1}.
TEST_CASE("tool: find refuses projections that are not field paths", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": {\"b\": 2}}\n");
  ExpectError(RunTool({"find", db, "--project=-"}), 2, {"project"});
  ExpectError(RunTool({"find", db, "--project=-$a"}), 2, {"project", "$a"});
  ExpectError(RunTool({"find", db, "--project=a,-b"}), 2, {"keep and drop"});
  ExpectError(RunTool({"find", db, "--project", "$a"}), 2, {"project", "$a"});
  ExpectError(RunTool({"find", db, "--project", "a.$b"}), 2, {"project", "a.$b"});
  ExpectError(RunTool({"find", db, "--project", "a..b"}), 2, {"project", "a..b"});
  ExpectError(RunTool({"find", db, "--project", "a,.b"}), 2, {"project", ".b"});
  ExpectError(RunTool({"find", db, "--project", ""}), 2, {"project"});
  ExpectError(RunTool({"find", db, "--project=-a..b", "--explain"}), 2, {"project"});
  ExpectError(RunTool({"find", db, "--sort", "$a"}), 2, {"sort", "$a"});
  CHECK(MustRun({"find", db, "--project", "a.b"}).out ==
        "{ \"_id\" : 1, \"a\" : { \"b\" : 2 } }\n");
  // -FIELD drops a field and keeps the rest (MongoDB's {FIELD: 0}).
  CHECK(MustRun({"find", db, "--project=-a"}).out == "{ \"_id\" : 1 }\n");
  CHECK(MustRun({"find", db, "--project=-a.b"}).out == "{ \"_id\" : 1, \"a\" : {  } }\n");
  CHECK(MustRun({"find", db, "--project=-_id"}).out == "{ \"a\" : { \"b\" : 2 } }\n");
  CHECK(MustRun({"find", db, "--project=a,-_id"}).out == "{ \"a\" : { \"b\" : 2 } }\n");
}

// a missing collection exited 1 from export but 0 ("wrote
// 0 documents") from export --salvage.
TEST_CASE("tool: export of a missing collection exits 1, salvage or not", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  ExpectError(RunTool({"export", db, "-c", "nope"}), 1, {"nope"});
  ExpectError(RunTool({"export", db, "-c", "nope", "--salvage"}), 1, {"nope"});
  // Nor is an output file left behind.
  ExpectError(RunTool({"export", db, "-c", "nope", "-o", dir.File("o.json")}), 1, {"nope"});
  ExpectError(RunTool({"export", db, "-c", "nope", "--salvage", "-o", dir.File("o.json")}), 1,
              {"nope"});
  struct stat st;
  CHECK(stat(dir.File("o.json").c_str(), &st) != 0);
  Run salvage = MustRun({"export", db, "--salvage"});
  CHECK(salvage.out == "{ \"_id\" : 1 }\n");
}

// 'a,b' made an index on a field named "a,b"; it is now the compound index.
TEST_CASE("tool: index create of an index already there is done, one with other options refused",
          "[tools]") {
  // Found by an outside test: the same create twice exited 2 ("index
  // exists"), where MongoDB's createIndex is a no-op, so a setup script that
  // runs it every time failed.
  TempDir dir;
  const std::string db = dir.File("i.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1, \"b\": 2}\n");
  for (int i = 0; i < 2; i++) {
    MustRun({"index", "create", db, "a", "--unique"});
    MustRun({"index", "create", db, "a,-b", "--partial", "{\"a\": {\"$gt\": 0}}"});
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"index", "create", db, "a"},
        {"index", "create", db, "a", "--unique", "--sparse"},
        {"index", "create", db, "a,-b", "--partial", "{\"a\": {\"$gt\": 1}}"}}) {
    ExpectError(RunTool(args), 2, {"exists with other options"});
  }
  CHECK(Lines(MustRun({"index", "list", db}).out).size() == 2);
  ExpectCheckOk(db);
}

TEST_CASE("tool: index create refuses what is not one dotted field path", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1, \"b\": 2}\n");
  ExpectError(RunTool({"index", "create", db, "a,,b"}), 2, {"a,,b"});
  ExpectError(RunTool({"index", "create", db, "a,$b"}), 2, {"$b"});
  ExpectError(RunTool({"index", "create", db, R"({"a": 1, "b": "text"})"}), 2, {"1 or -1", "b"});
  ExpectError(RunTool({"index", "create", db, R"({"a": 1)"}), 2, {"key pattern"});
  ExpectError(RunTool({"index", "create", db, "a,a"}), 2, {"twice"});
  ExpectError(RunTool({"index", "create", db, "a", "--partial", R"({"a": {"$ne": 1}})"}), 2,
              {"$ne"});
  ExpectError(RunTool({"index", "create", db, "a", "--partial", "{bad"}), 2, {"--partial"});
  ExpectError(RunTool({"index", "create", db, "a.$b"}), 2, {"a.$b"});
  ExpectError(RunTool({"index", "create", db, "$a"}), 2, {"$a"});
  ExpectError(RunTool({"index", "create", db, "a..b"}), 2, {"a..b"});
  ExpectError(RunTool({"index", "create", db, ""}), 2, {"index create"});
  CHECK(MustRun({"index", "list", db}).out.empty());
  MustRun({"index", "create", db, "a.b"});
  CHECK(Contains(MustRun({"index", "list", db}).out, "\"a.b\""));
}

TEST_CASE("tool: compound, sparse and partial indexes", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 1, \"a\": 1, \"b\": 2}\n{\"_id\": 2, \"a\": 1, \"b\": 3}\n"
          "{\"_id\": 3, \"a\": 2}\n");
  MustRun({"index", "create", db, "a,-b"});
  MustRun({"index", "create", db, R"({"b": 1, "a": -1})", "--unique", "--sparse"});
  MustRun({"index", "create", db, "--fields", "_id,b", "--partial", R"({"b": {"$gt": 2}})"});
  Run list = MustRun({"index", "list", db});
  CHECK(Contains(list.out, R"("field" : "a_1_b_-1", "key" : { "a" : 1, "b" : -1 })"));
  CHECK(Contains(list.out, R"("field" : "b_1_a_-1")"));
  CHECK(Contains(list.out, R"("sparse" : true)"));
  CHECK(Contains(list.out, R"("partialFilterExpression" : { "b" : { "$gt" : 2 } })"));
  Run e = MustRun({"find", db, R"({"a": 1, "b": {"$gt": 2}})", "--explain"});
  CHECK(Contains(e.out, R"("index": "a_1_b_-1")"));
  CHECK(Contains(e.out, R"("totalKeysExamined": 1)"));
  CHECK(Contains(e.out, R"("nReturned": 1)"));
  Run f = MustRun({"find", db, "{}", "--sort", "a,-b", "--limit", "1"});
  CHECK(Contains(f.out, R"("_id" : 2)"));
  // The unique sparse index: a second {b: 2, a: 1} is refused, exit 2.
  ExpectError(RunTool({"insert", db}, "{\"_id\": 4, \"a\": 1, \"b\": 2}\n"), 2, {"b_1_a_-1"});
  ExpectError(RunTool({"insert", db}, "{\"_id\": 5, \"a\": [1], \"b\": [2]}\n"), 2,
              {"parallel arrays"});
  // Dropped by key pattern or by name.
  MustRun({"index", "drop", db, "a,-b"});
  MustRun({"index", "drop", db, "b_1_a_-1"});
  MustRun({"index", "drop", db, R"({"_id": 1, "b": 1})"});
  CHECK(MustRun({"index", "list", db}).out.empty());
  ExpectCheckOk(db);
}

// stats ignored -c.
TEST_CASE("tool: stats -c shows only that collection", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db, "-c", "apples"}, "{\"_id\": 1}\n");
  MustRun({"insert", db, "-c", "pears"}, "{\"_id\": 1}\n{\"_id\": 2}\n");
  Run all = MustRun({"stats", db});
  CHECK(Contains(all.out, "apples"));
  CHECK(Contains(all.out, "pears"));
  Run one = MustRun({"stats", db, "-c", "pears"});
  CHECK(Contains(one.out, "pears"));
  CHECK(Contains(one.out, "file size"));
  CHECK_FALSE(Contains(one.out, "apples"));
  Run json = MustRun({"stats", db, "--collection", "pears", "--json"});
  CHECK(Contains(json.out, "pears"));
  CHECK_FALSE(Contains(json.out, "apples"));
  ExpectError(RunTool({"stats", db, "-c", "nope"}), 1, {"nope"});
  ExpectError(RunTool({"stats", db, "-c", "nope", "--json"}), 1, {"nope"});
}

size_t Occurrences(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t i = s.find(part); i != std::string::npos; i = s.find(part, i + 1)) ++n;
  return n;
}

TEST_CASE("tool: --wait waits for a database another process holds", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("w.mmdb");
  MustRun({"insert", db}, "{\"_id\": 0}\n");
  {
    auto held = DB::Open(db);
    REQUIRE(held.ok());
    ExpectError(RunTool({"get", db, "0"}), 2, {"locked", "--wait"});
    const auto t0 = std::chrono::steady_clock::now();
    ExpectError(RunTool({"get", db, "0", "--wait", "0.3"}), 2, {"locked", "waited 300 ms"});
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(300));
  }
  for (const char* bad : {"-1", "nan", "inf", "86401", "soon"})
    ExpectError(RunTool({"get", db, "0", "--wait", bad}), 2, {"--wait"});

  // Processes started together, each opening the database for its own
  // inserts: with --wait each gets its turn, and nothing is lost.
  constexpr int kProcs = 4, kDocs = 50;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; p++) {
    std::string in;
    for (int i = 0; i < kDocs; i++)
      in += "{\"_id\": " + std::to_string(1 + p * kDocs + i) + ", \"p\": " + std::to_string(p) +
            "}\n";
    const std::string base = dir.File("p" + std::to_string(p));
    WriteFile(base + ".in", in);
    const pid_t pid =
        StartTool({"insert", db, "--wait", "60"}, base + ".in", base + ".out", base + ".err");
    REQUIRE(pid >= 0);
    pids.push_back(pid);
  }
  for (int p = 0; p < kProcs; p++) {
    int wstatus = 0;
    REQUIRE(waitpid(pids[p], &wstatus, 0) == pids[p]);
    INFO("process " << p << ": " << ReadFile(dir.File("p" + std::to_string(p) + ".err")));
    CHECK(WIFEXITED(wstatus));
    CHECK(WEXITSTATUS(wstatus) == 0);
  }
  CHECK(CountOf(db) == 1 + kProcs * kDocs);
  for (int p = 0; p < kProcs; p++)
    CHECK(CountOf(db, "{\"p\": " + std::to_string(p) + "}") == kDocs);
  ExpectCheckOk(db);
}

// the Busy message said "locked by another process or
// handle" twice.
TEST_CASE("tool: a locked database is reported once, naming the file", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("lk.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  auto held = DB::Open(db);
  REQUIRE(held.ok());
  for (const Run& r : {RunTool({"get", db, "1"}), RunTool({"check", db})}) {
    ExpectError(r, 2, {"lk.mmdb"});
    CHECK(Occurrences(r.err, "locked by another process or handle") == 1);
  }
}

TEST_CASE("tool: reads share the database and write nothing, while a write waits", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("sh.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"k\": 1}\n{\"_id\": 2, \"k\": 2}\n");
  MustRun({"index", "create", db, "k"});
  auto bytes = [&] { return ReadFile(db) + "|" + ReadFile(db + "-log"); };
  const std::string before = bytes();
  {
    // Another reader holds it: the tool's reads go on beside it.
    Options ro;
    ro.read_only = true;
    auto reader = DB::Open(db, ro);
    REQUIRE(reader.ok());
    CHECK(MustRun({"count", db}).out == "2\n");
    CHECK(MustRun({"find", db, "{\"k\": 2}"}).out == "{ \"_id\" : 2, \"k\" : 2 }\n");
    MustRun({"get", db, "1"});
    MustRun({"stats", db});
    MustRun({"index", "list", db});
    MustRun({"export", db});
    ExpectCheckOk(db);
    // A write does not.
    const Run w = RunTool({"insert", db}, "{\"_id\": 3}\n");
    ExpectError(w, 2, {"locked", "--wait"});
    CHECK(*reader.value()->Count("default") == 2);
  }
  CHECK(bytes() == before);
  MustRun({"insert", db}, "{\"_id\": 3}\n");
  CHECK(CountOf(db) == 3);
}

// find --help listed fewer operators than the engine has.
TEST_CASE("tool: find --help lists the operators the engine supports", "[tools]") {
  Run help = MustRun({"find", "--help"});
  for (const char* op :
       {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$regex",
        "$elemMatch", "$size", "$all", "$type", "$not", "$mod", "$and", "$or", "$nor"}) {
    CHECK(Contains(help.out, op));
  }
  CHECK(Contains(help.out, "not supported"));
  CHECK(Contains(help.out, "$where"));
}

TEST_CASE("tool: find with $regex and the array operators, a bad regex is one line, exit 2",
          "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db},
          "{\"_id\": 1, \"name\": \"user1\", \"tags\": [1, 5]}\n"
          "{\"_id\": 2, \"name\": \"admin\", \"tags\": [2]}\n"
          "{\"_id\": 3, \"name\": \"user3\", \"tags\": []}\n");
  Run r = MustRun({"find", db, R"({"name": {"$regex": "^user"}})"});
  std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(Contains(lines[0], "user1"));
  CHECK(Contains(lines[1], "user3"));
  CHECK(Lines(MustRun({"find", db, R"({"name": {"$regex": "^USER", "$options": "i"}})"}).out)
            .size() == 2);
  MustRun({"index", "create", db, "name"});
  Run ex = MustRun({"find", db, R"({"name": {"$regex": "^user"}})", "--explain"});
  CHECK(Contains(ex.out, "IXSCAN"));
  CHECK(CountOf(db, R"({"tags": {"$elemMatch": {"$gt": 1, "$lt": 5}}})") == 1);
  CHECK(CountOf(db, R"({"tags": {"$size": 0}})") == 1);
  CHECK(CountOf(db, R"({"tags": {"$all": [1, 5]}})") == 1);
  CHECK(CountOf(db, R"({"_id": {"$mod": [2, 1]}})") == 2);
  CHECK(CountOf(db, R"({"name": {"$not": {"$regex": "^user"}}})") == 1);
  CHECK(CountOf(db, R"({"name": {"$type": "string"}})") == 3);
  // Type names that start with a hex digit, and numeric codes: libbson's
  // JSON reader took these for legacy binary.
  CHECK(CountOf(db, R"({"tags": {"$type": "array"}})") == 3);
  CHECK(CountOf(db, R"({"tags": {"$type": 16}})") == 2);
  CHECK(CountOf(db, R"({"name": {"$type": [2, "date"]}})") == 3);
  MustRun({"update", db, R"({"_id": 3})", R"({"$currentDate": {"seen": {"$type": "date"}}})"});
  CHECK(CountOf(db, R"({"seen": {"$type": "date"}})") == 1);
  ExpectError(RunTool({"find", db, R"({"name": {"$regex": "a(b"}})"}), 2,
              {"invalid regular expression", "/a(b/"});
  // A newline in the pattern stays on the one line.
  ExpectError(RunTool({"find", db, R"({"name": {"$regex": "a\n("}})"}), 2, {"/a\\x0a(/"});
  ExpectError(RunTool({"count", db, R"({"tags": {"$size": -1}})"}), 2, {"$size"});
  ExpectError(RunTool({"find", db, R"({"tags": {"$mod": [0, 1]}})"}), 2, {"$mod"});
}

// there was no --version.
TEST_CASE("tool: --version prints the project version", "[tools]") {
  // The version CMake's project() declared, as the build wrote it into the
  // package's version file.
  std::string config = ReadFile(BuildDir() + "/mmdocConfigVersion.cmake");
  const std::string key = "set(PACKAGE_VERSION \"";
  size_t at = config.find(key);
  REQUIRE(at != std::string::npos);
  at += key.size();
  const std::string version = config.substr(at, config.find('"', at) - at);
  REQUIRE_FALSE(version.empty());
  Run r = MustRun({"--version"});
  CHECK(r.out == "mmdoc " + version + "\n");
  CHECK(r.err.empty());
}

// Every entry of `dir` (not recursive) with its bytes; a directory maps to
// "<dir>". To show that a command created or changed nothing.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    const std::string path = dir + "/" + name;
    REQUIRE(stat(path.c_str(), &st) == 0);
    files[name] = S_ISDIR(st.st_mode) ? "<dir>" : ReadFile(path);
  }
  closedir(d);
  return files;
}

// every command given a missing file, a directory, an empty file
// or a file that is not a database fails with one line and exit 2, and
// creates or changes nothing. (insert, import and index create given a
// missing file create the database: that is how one is made.)
TEST_CASE("tool: bad database paths: one line, exit 2, nothing touched", "[tools]") {
  TempDir inputs;
  const std::string json = inputs.File("in.json");
  WriteFile(json, "{\"_id\": 9}\n");
  TempDir dir;
  REQUIRE(mkdir(dir.File("dir.mmdb").c_str(), 0755) == 0);
  WriteFile(dir.File("empty.mmdb"), "");
  std::string junk;
  for (int i = 0; i < 3 * 4096; ++i) junk.push_back(static_cast<char>((i * 7919 + 13) % 256));
  WriteFile(dir.File("junk.mmdb"), junk);
  WriteFile(dir.File("text.mmdb"), "hello\n");
  const auto before = Snapshot(dir.path());

  struct Case {
    const char* file;
    const char* says;
  };
  for (const Case& bad :
       {Case{"missing.mmdb", "no such database file"}, Case{"dir.mmdb", "directory"},
        Case{"empty.mmdb", "empty"}, Case{"junk.mmdb", "not an mmdoc database"},
        Case{"text.mmdb", "not an mmdoc database"}}) {
    const std::string p = dir.File(bad.file);
    const bool missing = std::string(bad.file) == "missing.mmdb";
    std::vector<std::vector<std::string>> commands = {{"get", p, "1"},
                                                      {"find", p},
                                                      {"count", p},
                                                      {"export", p},
                                                      {"export", p, "--salvage"},
                                                      {"stats", p},
                                                      {"check", p},
                                                      {"index", "list", p},
                                                      {"update", p, "{}", "{\"$set\": {\"a\": 1}}"},
                                                      {"delete", p, "{}"},
                                                      {"index", "drop", p, "a"},
                                                      {"compact", p}};
    if (!missing) {
      commands.push_back({"insert", p});
      commands.push_back({"import", p, json});
      commands.push_back({"index", "create", p, "a"});
    }
    for (const auto& args : commands) {
      INFO("mmdoc " << args[0] << " " << args[1] << " on " << bad.file);
      ExpectError(RunTool(args, "{\"_id\": 9}\n"), 2, {bad.says});
      CHECK(Snapshot(dir.path()) == before);
    }
  }
}

// The read-only commands open without create_if_missing, so a database's
// files (and a missing log) stay as they were.
TEST_CASE("tool: read-only commands leave the database files as they were", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1}\n{\"_id\": 2}\n");
  MustRun({"insert", db, "-c", "other"}, "{\"_id\": 3}\n");
  MustRun({"index", "create", db, "a"});
  TempDir out;
  const std::vector<std::vector<std::string>> commands = {
      {"get", db, "1"},
      {"find", db, "{\"a\": 1}"},
      {"count", db},
      {"export", db},
      {"export", db, "--format", "bson", "-o", out.File("dump.bson")},
      {"export", db, "--salvage", "-c", "other"},
      {"stats", db},
      {"stats", db, "--json", "-c", "other"},
      {"check", db},
      {"index", "list", db}};
  for (bool without_log : {false, true}) {
    if (without_log) REQUIRE(std::remove((db + "-log").c_str()) == 0);
    const auto before = Snapshot(dir.path());
    for (const auto& args : commands) {
      INFO("mmdoc " << args[0] << (without_log ? " without the log" : ""));
      MustRun(args);
      CHECK(Snapshot(dir.path()) == before);
    }
  }
}

// A write whose commit succeeded but whose database could not close (no
// room to merge the write buffer into the pages): exit 0, as the change is
// made (found by an outside test: exit 2 made a script retry it, and a
// retried insert failed as a duplicate), with a warning that the close
// failed; the reads after it see it.
TEST_CASE("tool: a write that commits but cannot close on a full disk warns, exit 0", "[tools]") {
  SmallDisk disk(3 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string db = disk.File("d.mmdb");
  // A buffer of its own size, so that MMDOC_WRITE_BUFFER does not replace it.
  const std::string buffer = "--write-buffer-mib=32";
  std::string docs;
  for (int i = 0; i < 6000; i++)
    docs += "{\"_id\": " + std::to_string(i) + ", \"s\": \"" + std::string(200, 'x') + "\"}\n";
  // The message says which batch failed and how much is in.
  const Run full = RunTool({"insert", db, buffer, "--batch", "100"}, docs);
  ExpectError(full, 2, {"disk full", "the commit of the 100 documents up to here failed"});
  auto count = [&] { return std::stoull(MustRun({"count", db, buffer}).out); };
  const uint64_t n = count();
  REQUIRE(n > 0);
  REQUIRE(n < 6000);
  CHECK(n % 100 == 0);
  CHECK(full.err.find("the " + std::to_string(n) + " before them are committed") !=
        std::string::npos);
  const Run one = RunTool({"insert", db, buffer}, "{\"_id\": \"one more\"}\n");
  INFO(one.err);
  CHECK(one.status == 0);
  for (const char* part : {"mmdoc: warning: close", "disk full", "committed"}) {
    CHECK(one.err.find(part) != std::string::npos);
  }
  CHECK(count() == n + 1);
  MustRun({"get", db, buffer, "\"one more\""});
  MustRun({"check", db, buffer});
}

// Found by an independent test: past `ulimit -f` the kernel's SIGXFSZ ended
// the tool with no message. It now gets EFBIG: one line, exit 2, and what
// was committed before stays.
TEST_CASE("tool: a file size limit is an error, not a signal", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("d.mmdb"), json = dir.File("in.json");
  std::string docs;
  for (int i = 0; i < 20000; i++)
    docs += "{\"_id\": " + std::to_string(i) + ", \"s\": \"" + std::string(200, 'x') + "\"}\n";
  WriteFile(json, docs);  // before the limit, which this process has too
  struct rlimit old;
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit small = old;
  small.rlim_cur = 2 << 20;  // the child inherits it; this process writes less
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const Run r = RunTool({"import", db, json, "--batch", "500"});
  REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
  ExpectError(r, 2, {"File too large"});
  const uint64_t n = std::stoull(MustRun({"count", db}).out);
  CHECK(n < 20000);
  CHECK(n % 500 == 0);
  MustRun({"check", db});
}

TEST_CASE("tool: import's errors name the problem", "[tools]") {
  // Found by an outside test: each of these named it wrongly or not at all.
  TempDir dir;
  const std::string db = dir.File("m.mmdb");
  // A NUL byte on line 2: the first document is committed, the error says NUL.
  WriteFile(dir.File("nul.json"), std::string("{\"_id\": 1}\n{\"_id\": 2, \"a\": \"x\0y\"}\n", 34));
  ExpectError(RunTool({"import", db, dir.File("nul.json")}), 2,
              {"document 2 at line 2", "NUL byte"});
  CHECK(MustRun({"count", db}).out == "1\n");
  // A negative BSON length is negative; one over 16 MiB names the limit.
  std::string neg = {'\xfb', '\xff', '\xff', '\xff', '\x10', 'a', '\0'};
  WriteFile(dir.File("neg.bson"), neg);
  ExpectError(RunTool({"import", db, dir.File("neg.bson")}), 2, {"bad document length -5"});
  std::string big = {'\x20', '\0', '\0', '\x01', '\x10', 'a', '\0', '\0', '\0', '\0', '\0', '\0'};
  WriteFile(dir.File("big.bson"), big);
  ExpectError(RunTool({"import", db, dir.File("big.bson")}), 2, {"16 MiB"});
  // One "invalid BSON", not two.
  std::string bad = {'\x0c', '\0', '\0', '\0', '\x10', 'a', '\0', '\x01', '\0', '\0', '\0', '\x01'};
  WriteFile(dir.File("bad.bson"), bad);
  const Run r = RunTool({"import", db, dir.File("bad.bson")});
  ExpectError(r, 2, {"invalid BSON"});
  CHECK_FALSE(Contains(r.err, "invalid BSON: invalid BSON"));
  // $inc of a Decimal128 says so.
  MustRun({"insert", db, "-c", "d"}, "{\"_id\": 1, \"g\": {\"$numberDecimal\": \"1.5\"}}\n");
  ExpectError(RunTool({"update", db, "-c", "d", "{}", "{\"$inc\": {\"g\": 1}}"}), 2,
              {"Decimal128"});
}

TEST_CASE("tool: export refuses to write over the database's own files", "[tools]") {
  // Found by an outside test: export -o DB truncated the data file it was
  // reading (SIGBUS, every document gone); -o DB-log replaced the log.
  TempDir dir;
  const std::string db = dir.File("x.mmdb"), link = dir.File("link.mmdb");
  std::string docs;
  for (int i = 0; i < 100; i++) docs += "{\"_id\": " + std::to_string(i) + "}\n";
  MustRun({"insert", db}, docs);
  REQUIRE(symlink(db.c_str(), link.c_str()) == 0);
  const std::string before = ReadFile(db);
  for (const std::string& out : {db, db + "-log", link}) {
    ExpectError(RunTool({"export", db, "-o", out}), 2, {"the database's own file"});
  }
  CHECK(RunWithPipe("export " + db + " >> " + db, "") == 2);
  CHECK(ReadFile(db) == before);
  CHECK(MustRun({"count", db}).out == "100\n");
  MustRun({"check", db});
}

TEST_CASE("tool: --project takes one value, so a FILTER after it stays the filter", "[tools]") {
  // Found by an outside test: `find DB --project name FILTER` took FILTER as
  // a second field and printed every document.
  TempDir dir;
  const std::string db = dir.File("p.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1, \"b\": 2}\n{\"_id\": 2, \"a\": 3, \"b\": 4}\n");
  CHECK(MustRun({"find", db, "--project", "a", "{\"_id\": 2}"}).out ==
        "{ \"_id\" : 2, \"a\" : 3 }\n");
  CHECK(MustRun({"find", db, "--project", "a", "--project", "b", "{\"_id\": 1}"}).out ==
        "{ \"_id\" : 1, \"a\" : 1, \"b\" : 2 }\n");
  ExpectError(RunTool({"find", db, "{}", "--project", "a", "b"}), 2, {"not expected"});
}

// Found by an outside test: std::getline took a read error for the end of
// the input, and the insert exited 0.
TEST_CASE("tool: insert fails on a read error of its input, naming it", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("r.mmdb");
  ExpectError(RunTool({"insert", db}, "", "", 0, dir.path()), 2,
              {"standard input", "Is a directory"});
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("tool: insert of bad input from its first line makes no database", "[tools]") {
  // Found by an outside test: `echo '{bad' | mmdoc insert new.mmdb` exited 2
  // and left a new empty database and log behind.
  TempDir dir;
  const std::string db = dir.File("new.mmdb");
  ExpectError(RunTool({"insert", db}, "\n{bad\n"), 2, {"line 2", "invalid JSON"});
  CHECK_FALSE(std::filesystem::exists(db));
  CHECK_FALSE(std::filesystem::exists(db + "-log"));
  MustRun({"insert", db}, "");  // nothing to insert: nothing made
  CHECK_FALSE(std::filesystem::exists(db));
  // A count option says what it takes (it said "0 not in range 0 to 1.8e308").
  for (const char* bad : {"0", "abc", "18446744073709551616", "-1"}) {
    ExpectError(RunTool({"insert", db, "--batch", bad}, "{}\n"), 2, {"--batch", "from 1"});
  }
  CHECK_FALSE(std::filesystem::exists(db));
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  CHECK(MustRun({"count", db}).out == "1\n");
}

TEST_CASE("tool: index create and drop refuse specs they would misread", "[tools]") {
  // Found by an outside test: --partial '' built a plain index, FIELD with
  // --fields dropped one, '[]' and a:1 indexed fields of those names, and a
  // drop of '{' said "not found" (exit 1).
  TempDir dir;
  const std::string db = dir.File("i.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1, \"a\": 1}\n");
  ExpectError(RunTool({"index", "create", db, "a", "--partial", ""}), 2, {"--partial"});
  ExpectError(RunTool({"index", "create", db, "a", "--fields", "b"}), 2, {"--fields"});
  for (const char* bad : {"[]", "[1]", "a:1", "a,b:-1"}) {
    ExpectError(RunTool({"index", "create", db, bad}), 2, {"expected FIELD"});
  }
  CHECK(MustRun({"index", "list", db}).out.empty());
  MustRun({"index", "create", db, "{\"a\": -1}"});
  for (const char* bad : {"{", ""}) ExpectError(RunTool({"index", "drop", db, bad}), 2, {"drop"});
  ExpectError(RunTool({"index", "drop", db, "nosuch"}), 1, {"nosuch"});
  MustRun({"index", "drop", db, "{\"a\": -1}"});
  CHECK(MustRun({"index", "list", db}).out.empty());
}

TEST_CASE("tool: names with control bytes print escaped", "[tools]") {
  // Found by an outside test: stats and errors sent a collection name's
  // terminal escapes raw.
  TempDir dir;
  const std::string db = dir.File("e.mmdb"), name = "\x1b[31mRED";
  MustRun({"insert", db, "-c", name}, "{\"_id\": 1}\n");
  const Run stats = MustRun({"stats", db});
  CHECK(Contains(stats.out, "\\x1b[31mRED"));
  CHECK_FALSE(Contains(stats.out, "\x1b"));
  const Run r = RunTool({"stats", db, "-c", "x\x1b"});
  ExpectError(r, 1, {"\\x1b"});
  CHECK_FALSE(Contains(r.err, "\x1b"));
  // An empty name is bad input for every command (stats said "not found").
  for (const char* cmd : {"stats", "export", "check", "count", "find"}) {
    ExpectError(RunTool({cmd, db, "-c", ""}), 2, {"must not be empty"});
  }
  ExpectError(RunTool({"insert", db, "-c", ""}, ""), 2, {"must not be empty"});
}

TEST_CASE("tool: out of memory mid-insert is one line, and loses no commit it reported",
          "[tools]") {
  // Found by an outside test: under ulimit -v, std::bad_alloc escaped the
  // publish of a logged commit (and the merger thread) and the tool aborted.
  if (kSanitized) {
    WARN("skipped: the sanitizers' runtimes reserve address space of their own");
    return;
  }
  std::string input;
  for (int i = 0; i < 200000; i++)
    input += "{\"_id\": " + std::to_string(i) + ", \"pad\": \"" + std::string(150, 'p') + "\"}\n";
  for (const rlim_t mib : {rlim_t{120}, rlim_t{200}}) {
    INFO("ulimit -v " << mib << " MiB");
    TempDir dir;
    const std::string db = dir.File("d.mmdb");
    const std::string echoed = dir.File("echoed");
    WriteFile(echoed, "");
    const Run r =
        RunTool({"insert", db, "--echo", "--durability", "none"}, input, echoed, mib << 20);
    INFO(Show(r));
    REQUIRE(r.status != -1);      // not killed by SIGABRT
    if (r.status == 0) continue;  // this build fitted under the limit
    ExpectError(r, 2, {});
    if (!std::filesystem::exists(db)) continue;  // it could not even open
    // Every document it echoed (acknowledged) is there; a commit that was
    // logged when memory ran out may be there too.
    const size_t acknowledged = Lines(ReadFile(echoed)).size();
    const Run count = MustRun({"count", db});
    const size_t n = std::stoul(count.out);
    CHECK(n >= acknowledged);
    CHECK(n <= acknowledged + 1000);
    MustRun({"check", db});
  }
}

TEST_CASE("tool: a thread that cannot start is an error, not an abort", "[tools]") {
  // Found by an outside test: under ulimit -v, Open's std::thread threw
  // and the process aborted. A 64 TiB default thread stack (the child takes
  // it from RLIMIT_STACK) cannot be mapped, so the merger cannot start.
  if (kSanitized || DefaultWriteBuffer() == 0) {
    WARN(
        "skipped: the sanitizers' runtimes start threads of their own; without a buffer "
        "there is no merger thread");
    return;
  }
  TempDir dir;
  const std::string db = dir.File("d.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  struct rlimit old;
  REQUIRE(getrlimit(RLIMIT_STACK, &old) == 0);
  struct rlimit huge = old;
  huge.rlim_cur = rlim_t{1} << 46;
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < huge.rlim_cur) {
    WARN("skipped: the hard stack limit is below 64 TiB");
    return;
  }
  REQUIRE(setrlimit(RLIMIT_STACK, &huge) == 0);
  // A write starts the merger; a read opens read-only and starts none.
  const Run r = RunTool({"insert", db}, "{\"_id\": 2}\n");
  const Run read = RunTool({"count", db});
  REQUIRE(setrlimit(RLIMIT_STACK, &old) == 0);
  ExpectError(r, 2, {"cannot start", "thread"});
  CHECK(read.status == 0);
  CHECK(read.out == "1\n");
  CHECK(MustRun({"count", db}).out == "1\n");
  MustRun({"check", db});
}

// Runs `shell` with /bin/sh (for redirections such as >&-); its exit status.
int Shell(const std::string& shell) {
  const int w = std::system(shell.c_str());
  return WIFEXITED(w) ? WEXITSTATUS(w) : -1;
}

TEST_CASE("tool: a closed stdin, stdout or stderr never becomes the database's file", "[tools]") {
  TempDir dir;
  const std::string db = dir.File("t.mmdb"), in = dir.File("in"), err = dir.File("err");
  MustRun({"insert", db}, "{\"_id\": 0, \"v\": \"precious\"}\n");
  std::string docs;
  for (int i = 1; i <= 2000; i++) docs += "{\"_id\": " + std::to_string(i) + "}\n";
  WriteFile(in, docs);
  // The echo cannot be written; the inserts are committed and it says so.
  int rc = Shell(ToolPath() + " insert " + db + " --echo < " + in + " >&- 2>" + err);
  const std::string msg = ReadFile(err);
  INFO(msg);
  CHECK(rc == 2);
  CHECK(Contains(msg, "writing the output"));
  CHECK(Contains(msg, "committed"));
  CHECK(CountOf(db) == 2001);
  // A long error message (a path 110 levels deep) with stderr closed.
  std::string path = std::string(60, 'f');
  for (int i = 1; i < 110; i++) path += "." + std::string(60, 'f');
  rc = Shell(ToolPath() + " update " + db + " '{\"_id\": 0}' '{\"$set\": {\"" + path +
             "\": 1}}' 2>&-");
  CHECK(rc == 2);
  CHECK(MustRun({"get", db, "0"}).out == "{ \"_id\" : 0, \"v\" : \"precious\" }\n");
  // Reads with stdout closed fail as before, and harm nothing.
  CHECK(Shell(ToolPath() + " find " + db + " >&- 2>/dev/null") == 2);
  ExpectCheckOk(db);
  CHECK(CountOf(db) == 2001);
  // A closed stdin is an error, not an empty input, and makes no database.
  const std::string fresh = dir.File("fresh.mmdb");
  CHECK(Shell(ToolPath() + " import " + fresh + " - <&- 2>" + err) == 2);
  CHECK(Contains(ReadFile(err), "standard input"));
  CHECK(Shell(ToolPath() + " insert " + fresh + " <&- 2>" + err) == 2);
  CHECK(Contains(ReadFile(err), "standard input"));
  CHECK_FALSE(std::filesystem::exists(fresh));
}

TEST_CASE("tool: endless or foreign streams fail at once, a FIFO log neither hangs nor goes",
          "[tools]") {
  TempDir dir;
  // Binary bytes from a stream are refused before it is copied anywhere.
  const std::string z = dir.File("z.mmdb");
  ExpectError(RunTool({"import", z, "/dev/zero"}), 2, {"/dev/zero", "binary data"});
  // A line without end is refused at the limit on a document's text.
  ExpectError(RunTool({"insert", z}, "", "", 0, "/dev/zero"), 2, {"line 1", "longer than"});
  CHECK_FALSE(std::filesystem::exists(z));
  // A stream that is documents is still imported (spooled after its head).
  const std::string p = dir.File("p.mmdb");
  MustRun({"import", p, "-"}, "  \n{\"_id\": 1}\n{\"_id\": 2}\n");
  CHECK(CountOf(p) == 2);

  const std::string db = dir.File("f.mmdb");
  MustRun({"insert", db}, "{\"_id\": 1}\n");
  REQUIRE(std::filesystem::remove(db + "-log"));
  REQUIRE(mkfifo((db + "-log").c_str(), 0644) == 0);
  ExpectError(RunTool({"count", db}), 2, {"not a regular file"});
  ExpectError(RunTool({"update", db, "{\"_id\": 1}", "{\"$set\": {\"a\": 1}}"}), 2,
              {"not a regular file"});
  CHECK(std::filesystem::is_fifo(db + "-log"));
  REQUIRE(std::filesystem::remove(db + "-log"));
  CHECK(CountOf(db) == 1);
}

TEST_CASE("tool: an export that cannot be written names its output and says it is incomplete",
          "[tools]") {
  TempDir dir;
  const std::string db = dir.File("e.mmdb");
  std::string docs;
  for (int i = 0; i < 3000; i++)
    docs += "{\"_id\": " + std::to_string(i) + ", \"pad\": \"" + std::string(100, 'x') + "\"}\n";
  MustRun({"insert", db}, docs);
  ExpectError(RunTool({"export", db, "-o", "/dev/full"}), 2,
              {"export: writing /dev/full", "No space left", "incomplete"});
}

TEST_CASE("tool: insert skips a byte order mark, and a bad -c or a missing directory is named",
          "[tools]") {
  // Found by an outside test: insert refused the mark import skips; a long
  // -c was blamed on "line 1"; a missing directory was "open unnamed file".
  TempDir dir;
  const std::string db = dir.File("b.mmdb");
  MustRun({"insert", db}, "\xEF\xBB\xBF{\"_id\": 1}\n{\"_id\": 2}\n");
  CHECK(CountOf(db) == 2);
  ExpectError(RunTool({"insert", db, "-c", std::string(201, 'c')}, "{\"_id\": 3}\n"), 2,
              {"mmdoc: -c: collection name longer than 200 bytes"});
  ExpectError(RunTool({"insert", dir.File("none/b.mmdb")}, "{\"_id\": 1}\n"), 2,
              {"none/b.mmdb", "its directory does not exist"});
  CHECK(CountOf(db) == 2);
}

TEST_CASE("tool: bad input leaves no new database behind, and an old one as it was", "[tools]") {
  TempDir dir;
  const std::string one = dir.File("one.json"), bad = dir.File("bad.json");
  WriteFile(one, "{\"_id\": 1}\n");
  WriteFile(bad, "{\"_id\": 1, bad}\n");  // found by an outside test: left an empty database
  const std::string long_name(300, 'c');
  struct Case {
    std::vector<std::string> args;
    std::string input;
  };
  const std::vector<Case> cases = {
      {{"import", "DB", one, "-c", long_name}, ""},
      {{"import", "DB", bad}, ""},
      {{"insert", "DB", "-c", long_name}, "{\"_id\": 1}\n"},
      {{"update", "DB", "{\"_id\": 1}", "{\"$foo\": {\"a\": 1}}", "--upsert"}, ""},
      {{"index", "create", "DB", "a", "--partial", "{\"$foo\": 1}"}, ""},
  };
  int n = 0;
  for (const Case& k : cases) {
    const std::string db = dir.File("new" + std::to_string(++n) + ".mmdb");
    std::vector<std::string> args = k.args;
    for (std::string& a : args)
      if (a == "DB") a = db;
    Run r = RunTool(args, k.input);
    INFO(Show(r));
    CHECK(r.status == 2);
    CHECK_FALSE(std::filesystem::exists(db));
    CHECK_FALSE(std::filesystem::exists(db + "-log"));
    // The same on a database that was there: it stays, unchanged.
    const std::string old = dir.File("old" + std::to_string(n) + ".mmdb");
    MustRun({"insert", old, "-c", "x"}, "{\"_id\": 7}\n");
    args = k.args;
    for (std::string& a : args)
      if (a == "DB") a = old;
    CHECK(RunTool(args, k.input).status == 2);
    CHECK(CountOf(old, "{}", "x") == 1);
  }
  // What a failed insert committed before its bad line stays.
  const std::string part = dir.File("part.mmdb");
  ExpectError(RunTool({"insert", part, "--batch", "1"}, "{\"_id\": 1}\n{\"_id\": 1}\n"), 2,
              {"line 2", "duplicate _id"});
  CHECK(CountOf(part) == 1);
}

}  // namespace
}  // namespace mmdoc::test
