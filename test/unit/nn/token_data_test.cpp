// Token files as other tools write them, built here byte by byte from the formats' descriptions
// (not with the library's writer): Megatron's indexed dataset with uint16 and int32 tokens, llm.c
// shards with uint16 and uint32 tokens, read back exactly; malformed files refused naming the
// file and the field; the tokenizer's dataset equal to the text it came from; validation splits.

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "nn/data.hpp"
#include "nn/formats/megatron.hpp"
#include "nn/token_formats.hpp"
#include "nn/tokenize.hpp"
#include "support/temp_dir.hpp"

namespace octo::nn::test {
namespace {

namespace fs = std::filesystem;

using Scratch = octo::test::TempDir;

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// A Megatron .idx for documents of the given lengths stored back to back with `elem` bytes per
/// token; `code` is the dtype code.
std::string megatron_index(const std::vector<std::int32_t>& lengths, std::uint8_t code, std::size_t elem) {
  std::string idx("MMIDIDX\0\0", 9);
  put<std::uint64_t>(idx, 1);
  put<std::uint8_t>(idx, code);
  put<std::uint64_t>(idx, lengths.size());
  put<std::uint64_t>(idx, lengths.size() + 1);
  for (std::int32_t n : lengths) put(idx, n);
  std::int64_t at = 0;
  for (std::int32_t n : lengths) {
    put(idx, at);
    at += n * static_cast<std::int64_t>(elem);
  }
  for (std::int64_t d = 0; d <= static_cast<std::int64_t>(lengths.size()); ++d) put(idx, d);
  return idx;
}

std::vector<std::int64_t> all(const TokenData& d) { return d.read(0, d.size()); }

}  // namespace

TEST_CASE("tokens: a Megatron indexed dataset with uint16 tokens reads back exactly", "[nn][tokens]") {
  const Scratch s("tokens");
  const std::vector<std::uint16_t> tokens = {5, 60000, 7, 8, 9, 65535, 0, 42};
  std::string bin;
  for (auto t : tokens) put(bin, t);
  write(s / "ds.bin", bin);
  write(s / "ds.idx", megatron_index({3, 5}, 8, 2));
  for (const std::string name : {"ds", "ds.bin", "ds.idx"}) {
    const TokenData d = TokenData::load(s / name);
    CHECK(d.type() == TokenType::U16);
    CHECK_THAT(d.format(), Catch::Contains("megatron") && Catch::Contains("2 documents"));
    CHECK(all(d) == std::vector<std::int64_t>(tokens.begin(), tokens.end()));
  }
}

TEST_CASE("tokens: a Megatron indexed dataset with int32 tokens, stored out of order, reads in index order",
          "[nn][tokens]") {
  const Scratch s("tokens");
  // Sequence 0 = {100000, 3} stored after sequence 1 = {-1 is invalid later, so 11, 12, 13}.
  std::string bin;
  for (std::int32_t t : {11, 12, 13, 100000, 3}) put(bin, t);
  write(s / "ds.bin", bin);
  std::string idx("MMIDIDX\0\0", 9);
  put<std::uint64_t>(idx, 1);
  put<std::uint8_t>(idx, 4);
  put<std::uint64_t>(idx, 2);
  put<std::uint64_t>(idx, 3);
  put<std::int32_t>(idx, 2);
  put<std::int32_t>(idx, 3);
  put<std::int64_t>(idx, 12);  // sequence 0 starts at byte 12
  put<std::int64_t>(idx, 0);
  for (std::int64_t d : {0, 1, 2}) put(idx, d);
  write(s / "ds.idx", idx);
  const TokenData d = TokenData::load(s / "ds");
  CHECK(d.type() == TokenType::I32);
  CHECK(all(d) == std::vector<std::int64_t>{100000, 3, 11, 12, 13});
  CHECK_THROWS_WITH(d.check_vocabulary(256), Catch::Contains("ds.bin") &&
                                                 Catch::Contains("token id 100000") &&
                                                 Catch::Contains("position 0") && Catch::Contains("256"));
  CHECK_NOTHROW(d.check_vocabulary(100001));
}

TEST_CASE("tokens: malformed indexed datasets are refused naming the file and the field", "[nn][tokens]") {
  const Scratch s("tokens");
  std::string bin;
  for (std::uint16_t t : {1, 2, 3, 4}) put(bin, t);
  write(s / "ds.bin", bin);
  const std::string good = megatron_index({4}, 8, 2);
  const auto refused = [&](std::string idx, const std::string& field) {
    write(s / "ds.idx", idx);
    CHECK_THROWS_WITH(TokenData::load(s / "ds"), Catch::Contains("ds.idx: " + field));
  };
  std::string v2 = good;
  v2[9] = 2;
  refused(v2, "version");
  std::string floats = good;
  floats[17] = 7;  // float32
  refused(floats, "dtype");
  refused(good.substr(0, good.size() - 4), "header");          // truncated
  refused(megatron_index({5}, 8, 2), "sequence_pointers[0]");  // 5 tokens in a 4-token .bin
  std::string docs = good;
  docs[docs.size() - 8] = 3;  // the last document boundary is 3, not 1
  refused(docs, "document_indices[1]");
  write(s / "ds.idx", good);
  fs::remove(s / "ds.bin");
  CHECK_THROWS_WITH(TokenData::load(s / "ds"), Catch::Contains("no data file"));
}

TEST_CASE("tokens: llm.c shards with uint16 and uint32 tokens read back exactly", "[nn][tokens]") {
  const Scratch s("tokens");
  const auto shard = [](std::int32_t magic, std::int32_t version, const std::vector<std::uint32_t>& tokens,
                        std::size_t elem) {
    std::string out;
    std::vector<std::int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = static_cast<std::int32_t>(tokens.size());
    for (auto h : header) put(out, h);
    for (auto t : tokens) {
      if (elem == 2)
        put(out, static_cast<std::uint16_t>(t));
      else
        put(out, t);
    }
    return out;
  };
  write(s / "gpt2.bin", shard(20240520, 1, {50256, 1, 2, 3, 50000}, 2));
  const TokenData g = TokenData::load(s / "gpt2.bin");
  CHECK(g.type() == TokenType::U16);
  CHECK_THAT(g.format(), Catch::Contains("llm.c"));
  CHECK(all(g) == std::vector<std::int64_t>{50256, 1, 2, 3, 50000});
  write(s / "llama.bin", shard(20240801, 7, {128000, 9, 127999}, 4));
  const TokenData l = TokenData::load(s / "llama.bin");
  CHECK(l.type() == TokenType::U32);
  CHECK(all(l) == std::vector<std::int64_t>{128000, 9, 127999});

  std::string truncated = shard(20240520, 1, {1, 2, 3}, 2);
  truncated.pop_back();
  write(s / "cut.bin", truncated);
  CHECK_THROWS_WITH(TokenData::load(s / "cut.bin"),
                    Catch::Contains("cut.bin: header[2] (token count)") && Catch::Contains("truncated"));
  write(s / "v2.bin", shard(20240520, 2, {1}, 2));
  CHECK_THROWS_WITH(TokenData::load(s / "v2.bin"), Catch::Contains("v2.bin: header[1] (version)"));
  std::string short_shard;
  put<std::int32_t>(short_shard, 20240520);  // the magic, then 3 bytes of a 1024-byte header
  write(s / "short.bin", short_shard + "xyz");
  CHECK_THROWS_WITH(TokenData::load(s / "short.bin"), Catch::Contains("short.bin: header"));
}

TEST_CASE(
    "tokens: any other file is byte-level text, never a .bin or .idx, and a missing one names both "
    "readings",
    "[nn][tokens]") {
  const Scratch s("tokens");
  write(s / "notes.txt", "plain text, named anything");
  const TokenData t = TokenData::load(s / "notes.txt");
  CHECK(t.format() == "text");
  CHECK(t.size() == 26);
  CHECK(t.token(0) == 'p');
  // A dataset's .bin without its .idx (or a shard without its magic) is not trained on as bytes.
  write(s / "notes.bin", "plain text, named .bin");
  CHECK_THROWS_WITH(TokenData::load(s / "notes.bin"),
                    Catch::Contains("notes.bin: a .bin or .idx file that is neither half"));
  // An index beside it that is no Megatron index: the index's magic is named, for all three names.
  write(s / "notes.idx", std::string(40, 'x'));
  for (const char* name : {"notes", "notes.bin", "notes.idx"})
    CHECK_THROWS_WITH(TokenData::load(s / name), Catch::Contains("notes.idx: magic: not MMIDIDX"));
  CHECK(token_files(s / "notes.bin") == std::vector<std::string>{s / "notes.idx", s / "notes.bin"});
  CHECK(token_files(s / "notes.txt") == std::vector<std::string>{s / "notes.txt"});
  CHECK_THROWS_WITH(TokenData::load(s / "absent"),
                    Catch::Contains("no such file") && Catch::Contains("absent.idx"));
}

TEST_CASE("tokens: octorun tokenize's dataset holds the text's bytes, one document per paragraph",
          "[nn][tokens]") {
  const Scratch s("tokens");
  const std::string text = "first paragraph\nstill first\n\nsecond\n\n\n\xC3\xA9 third";
  write(s / "in.txt", text);
  CHECK(paragraph_lengths(text) == std::vector<std::size_t>{29, 9, 8});
  const TokenizeSummary sum = tokenize_to_indexed_dataset(s / "in.txt", s / "out");
  CHECK(sum.tokens == text.size());
  CHECK(sum.documents == 3);
  const TokenData d = TokenData::load(s / "out");
  CHECK_THAT(d.format(), Catch::Contains("3 documents"));
  const TokenData direct(text, "in.txt");
  CHECK(all(d) == all(direct));
  // The same tokens give the same micro-batches whichever file they came from.
  CHECK(d.sequences(3, 2, 8).tokens == direct.sequences(3, 2, 8).tokens);
  // The index as bytes, by the format's description: 3 sequences, 4 boundaries, uint16 (code 8).
  const std::string idx = read_file(s / "out.idx");
  CHECK(idx.size() == 34 + 3 * 4 + 3 * 8 + 4 * 8);
  CHECK(static_cast<unsigned char>(idx[17]) == 8);
  CHECK(read_file(s / "out.bin").size() == 2 * text.size());
  CHECK_THROWS_WITH(formats::write_indexed_dataset(s / "x", std::vector<std::int64_t>{70000},
                                                   std::vector<std::size_t>{1}, TokenType::U16),
                    Catch::Contains("70000") && Catch::Contains("uint16"));
  // A prefix that is a device names no files beside it (-o /dev/null wrote /dev/null.bin and .idx);
  // one that is a file or a folder does (its outputs are other names).
  CHECK_THROWS_WITH(tokenize_to_indexed_dataset(s / "in.txt", "/dev/null"),
                    Catch::Contains("-o /dev/null: is a device or a FIFO, not a prefix"));
  CHECK_FALSE(std::filesystem::exists("/dev/null.bin"));
  CHECK(tokenize_to_indexed_dataset(s / "in.txt", s / "in.txt").documents == 3);  // in.txt.bin, in.txt.idx
}

TEST_CASE("tokens: sequences from a sample offset equal micro-batches by index, and the validation split",
          "[nn][tokens]") {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>('a' + (i * 13) % 26);
  const TokenData d(text, "synthetic");
  CHECK(d.sequences(4 * 3, 3, 16).tokens == d.microbatch(4, 3, 16).tokens);
  CHECK(d.sequences(4 * 3, 3, 16).targets == d.microbatch(4, 3, 16).targets);
  const auto [train, val] = split_validation(d, 0.1);
  CHECK(train.size() == 4500);
  CHECK(val.size() == 500);
  CHECK(val.token(0) == d.token(4500));
  CHECK(train.token(4499) == d.token(4499));
  // Validation windows stay inside the validation part.
  for (int sample = 0; sample < 50; ++sample) CHECK(val.window_start(sample, 16) + 17 <= val.size());
  CHECK_THROWS_WITH(split_validation(d, 1.5), Catch::Contains("validation fraction"));
  CHECK_THROWS_WITH(split_validation(TokenData("ab", "tiny"), 0.1), Catch::Contains("tiny"));
}

}  // namespace octo::nn::test
