// The hub client's parts that need no network: names, the API's JSON, the choice of files, the
// hashes (against hashlib's and git's values) and the cache's links (as huggingface_hub makes them).
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temporary.h"
#include "hub/cache.h"
#include "hub/checksum.h"
#include "hub/names.h"
#include "hub/repo_info.h"
#include "hub/snapshot.h"

namespace fs = std::filesystem;
using namespace gizml::hub;

TEST(HubNames, Forms) {
  ModelName n = parseName("Qwen/Qwen3-0.6B");
  EXPECT_EQ(n.repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(n.revision, "main");
  EXPECT_TRUE(n.file.empty() && n.quant.empty());
  n = parseName("Qwen/Qwen3-8B-GGUF:Q4_K_M");
  EXPECT_EQ(n.repo, "Qwen/Qwen3-8B-GGUF");
  EXPECT_EQ(n.quant, "Q4_K_M");
  n = parseName("org/repo:sub/Model-Q8_0.GGUF@0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(n.file, "sub/Model-Q8_0.GGUF");
  EXPECT_EQ(n.revision, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(parseName("org/repo@refs/pr/1").revision, "refs/pr/1");
  EXPECT_EQ(parseName("org/repo:Q4_0@dev").text(), "org/repo:Q4_0@dev");
}

TEST(HubNames, Catalogue) {
  EXPECT_EQ(parseName("qwen3:0.6b").repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(parseName("SmolLM2").repo, "HuggingFaceTB/SmolLM2-135M-Instruct");
  EXPECT_EQ(parseName("gemma3:270m").repo, "google/gemma-3-270m-it");
  EXPECT_EQ(parseName("z-image-turbo").repo, "Tongyi-MAI/Z-Image-Turbo");
  EXPECT_EQ(parseName("flux3-klein@v1").repo, "black-forest-labs/FLUX.2-klein-4B");
  EXPECT_EQ(parseName("flux3-klein@v1").revision, "v1");
  for (const CatalogueEntry& e : catalogue()) EXPECT_NO_THROW(parseName(e.name)) << e.alias;
}

TEST(HubNames, BadNamesSayWhy) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"llama", "neither a file or folder here, a repository"},
      {"org/", "no repository id"},
      {"/repo", "no repository id"},
      {"a/b/c", "no repository id"},
      {"org/re po", "no repository id"},
      {"org/--repo", "no repository id"},
      {"org/repo.", "no repository id"},
      {"org/" + std::string(97, 'a'), "no repository id"},
      {"org/repo:", "nothing after ':'"},
      {"org/repo:Q4 K", "neither a .gguf file nor a quantization"},
      {"org/repo:../x.gguf", "no file path"},
      {"org/repo:/x.gguf", "no file path"},
      {"org/repo@", "no revision"},
      {"org/repo@a..b", "no revision"},
      {"org/repo@bad rev", "no revision"},
      {"org/repo@x\n", "no revision"},
  };
  for (const auto& [text, why] : bad) {
    try {
      parseName(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const gizml::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(HubNames, SafeRepoPaths) {
  EXPECT_TRUE(safeRepoPath("transformer/diffusion_pytorch_model-00001-of-00002.safetensors"));
  for (const char* bad : {"", "/etc/passwd", "a/../../b", "..", "a//b", "a/", "./a", "a\\b", "a\tb"}) EXPECT_FALSE(safeRepoPath(bad)) << bad;
}

// The shape of GET /api/models/{repo}/revision/{rev}?blobs=true (huggingface_hub's RepoSibling fields).
const char* kQwenInfo = R"({"_id":"x","id":"Qwen/Qwen3-0.6B","sha":"c1899de289a04d12100db370d81485cdf75e47ca","private":false,
 "gated":false,"siblings":[
 {"rfilename":".gitattributes","blobId":"a6344aac8c09253b3b630fb776ae94478aa0275b","size":1519},
 {"rfilename":"LICENSE","blobId":"6634c8cc3133b3848ec74b9f275acaaa1ea618ab","size":11343},
 {"rfilename":"README.md","blobId":"4f5cd55c10b76b5d4a1d2ee0fda3fbbd2d6a5f4f","size":14035},
 {"rfilename":"config.json","blobId":"e5ad4a5a5b8e3b2b2dbcbb4ac0d5a7dfbe3e6b2e","size":726},
 {"rfilename":"generation_config.json","blobId":"0dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":239},
 {"rfilename":"merges.txt","blobId":"1dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":1671853},
 {"rfilename":"model.safetensors","blobId":"2dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":1503300328,
  "lfs":{"sha256":"f47f71177f32bcd101b7573ec9171e6a57f4f4d31148d38e382306f42996874b","size":1503300328,"pointerSize":135}},
 {"rfilename":"tokenizer.json","blobId":"3dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":11422654,
  "lfs":{"sha256":"aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4","size":11422654,"pointerSize":133}},
 {"rfilename":"tokenizer_config.json","blobId":"4dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":9732},
 {"rfilename":"vocab.json","blobId":"5dbd2f9e1e0c2d6d3e4f5a6b7c8d9e0f1a2b3c4d","size":2776833}]})";

std::vector<std::string> pathsOf(const Selection& s) {
  std::vector<std::string> paths;
  for (const RepoFile& f : s.files) paths.push_back(f.path);
  return paths;
}

std::vector<RepoFile> filesNamed(const std::vector<std::string>& paths) {
  std::vector<RepoFile> files;
  for (const std::string& p : paths) files.push_back({p, 1, std::string(40, 'a'), ""});
  return files;
}

TEST(HubRepoInfo, ParsesTheApiAnswer) {
  const RepoInfo info = parseRepoInfo(kQwenInfo);
  EXPECT_EQ(info.commit, "c1899de289a04d12100db370d81485cdf75e47ca");
  ASSERT_EQ(info.files.size(), 10u);
  EXPECT_EQ(info.files[6].path, "model.safetensors");
  EXPECT_EQ(info.files[6].size, 1503300328);
  EXPECT_EQ(info.files[6].etag(), "f47f71177f32bcd101b7573ec9171e6a57f4f4d31148d38e382306f42996874b");
  EXPECT_EQ(info.files[3].etag(), "e5ad4a5a5b8e3b2b2dbcbb4ac0d5a7dfbe3e6b2e");
  const Selection s = selectFiles(info.files, parseName("qwen3:0.6b"));
  EXPECT_EQ(s.kind, ModelKind::Safetensors);
  EXPECT_EQ(pathsOf(s), (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                                                    "tokenizer_config.json"}));
}

TEST(HubRepoInfo, RejectsBadAnswers) {
  const std::string sha = R"("sha":"c1899de289a04d12100db370d81485cdf75e47ca")";
  for (const std::string& bad : std::vector<std::string>{
           "", "[]", "{", R"({"siblings":[]})", R"({"sha":"abc","siblings":[]})", "{" + sha + "}",
           "{" + sha + R"(,"siblings":[{"size":1}]})", "{" + sha + R"(,"siblings":[{"rfilename":"../x"}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a"},{"rfilename":"a"}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a","size":-1}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a","size":"1"}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a","blobId":"../../etc"}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a","lfs":{"sha256":"../x","size":1}}]})",
           "{" + sha + R"(,"siblings":[{"rfilename":"a","lfs":[]}]})"})
    EXPECT_THROW(parseRepoInfo(bad), gizml::Error) << bad;
}

TEST(HubRepoInfo, PicksTheGgufByQuantization) {
  const auto files = filesNamed({"README.md", "Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_S.gguf", "Qwen3-8B-Q8_0.gguf",
                                 "mmproj-Qwen3-8B-Q8_0.gguf", "params"});
  EXPECT_EQ(selectFiles(files, parseName("Qwen/Qwen3-8B-GGUF:q4_k_m")).gguf, "Qwen3-8B-Q4_K_M.gguf");
  EXPECT_EQ(selectFiles(files, parseName("Qwen/Qwen3-8B-GGUF")).gguf, "Qwen3-8B-Q4_K_M.gguf");  // the default
  EXPECT_EQ(selectFiles(files, parseName("Qwen/Qwen3-8B-GGUF:Q8_0")).gguf, "Qwen3-8B-Q8_0.gguf");  // not the mmproj
  EXPECT_EQ(selectFiles(files, parseName("Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q4_K_S.gguf")).files.size(), 1u);
  try {
    selectFiles(files, parseName("Qwen/Qwen3-8B-GGUF:Q4_K"));  // a prefix of two names matches neither
    ADD_FAILURE();
  } catch (const gizml::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no GGUF file of quantization Q4_K (its GGUF files: Qwen3-8B-Q4_K_M.gguf"), std::string::npos)
        << e.what();
  }
  const auto split = filesNamed({"Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf"});
  EXPECT_THROW(selectFiles(split, parseName("o/r:Q4_K_M")), gizml::Error);
  EXPECT_THROW(selectFiles(filesNamed({"README.md"}), parseName("o/r")), gizml::Error);
}

TEST(HubRepoInfo, DiffusersPipelineComponents) {
  // Tongyi-MAI/Z-Image-Turbo's layout: model_index.json names the components' folders.
  const auto files = filesNamed({".gitattributes", "README.md", "assets/showcase.jpg", "model_index.json",
                                 "scheduler/scheduler_config.json", "text_encoder/config.json",
                                 "text_encoder/model-00001-of-00003.safetensors", "text_encoder/model.safetensors.index.json",
                                 "tokenizer/merges.txt", "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json",
                                 "tokenizer/vocab.json", "transformer/config.json",
                                 "transformer/diffusion_pytorch_model-00001-of-00003.safetensors",
                                 "transformer/diffusion_pytorch_model.safetensors.index.json", "vae/config.json",
                                 "vae/diffusion_pytorch_model.safetensors", "z_image_turbo_single_file.safetensors"});
  const std::string index = R"({"_class_name":"ZImagePipeline","_diffusers_version":"0.36.0","scheduler":["diffusers",
    "FlowMatchEulerDiscreteScheduler"],"text_encoder":["transformers","Qwen3Model"],"tokenizer":["transformers",
    "Qwen2Tokenizer"],"transformer":["diffusers","ZImageTransformer2DModel"],"vae":["diffusers","AutoencoderKL"]})";
  const Selection s = selectFiles(files, parseName("z-image-turbo"), index);
  EXPECT_EQ(s.kind, ModelKind::Diffusers);
  EXPECT_EQ(pathsOf(s), (std::vector<std::string>{"model_index.json", "scheduler/scheduler_config.json", "text_encoder/config.json",
                                                    "text_encoder/model-00001-of-00003.safetensors",
                                                    "text_encoder/model.safetensors.index.json", "tokenizer/merges.txt",
                                                    "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json",
                                                    "tokenizer/vocab.json", "transformer/config.json",
                                                    "transformer/diffusion_pytorch_model-00001-of-00003.safetensors",
                                                    "transformer/diffusion_pytorch_model.safetensors.index.json",
                                                    "vae/config.json", "vae/diffusion_pytorch_model.safetensors"}));
  EXPECT_THROW(selectFiles(files, parseName("z-image-turbo"), "not json"), gizml::Error);
}

TEST(HubChecksum, AgreesWithHashlibAndGit) {
  const fs::path file = gizml::test::temporary("hub_checksum");
  std::ofstream(file) << "hello\n";
  // hashlib.sha256(b"hello\n").hexdigest(); `git hash-object` of the same bytes.
  EXPECT_EQ(sha256OfFile(file), "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_EQ(gitBlobIdOfFile(file), "ce013625030ba8dba906f756967f9e9ca394464a");
  fs::remove(file);
}

TEST(HubCache, LinksAsHuggingfaceHubDoes) {
  const fs::path cache = gizml::test::temporary("hub_cache");
  const fs::path folder = repoFolder(cache, "org/name");
  EXPECT_EQ(folder.filename(), "models--org--name");
  const std::string commit(40, 'c'), etag(64, 'e');
  fs::create_directories(folder / "blobs");
  std::ofstream(folder / "blobs" / etag) << "bytes";
  linkSnapshotFile(folder, commit, "vae/config.json", etag);
  EXPECT_EQ(fs::read_symlink(folder / "snapshots" / commit / "vae" / "config.json"), fs::path("../../../blobs") / etag);
  writeRef(folder, "main", commit);
  EXPECT_EQ(cachedCommit(folder, "main"), commit);
  EXPECT_EQ(cachedCommit(folder, "dev"), "");
  EXPECT_EQ(cachedNames(cache), "org/name");
  EXPECT_EQ(removeSnapshot(cache, "org/name", commit), 5);
  EXPECT_FALSE(fs::exists(folder));
  fs::remove_all(cache);
}

TEST(HubUrls, EncodesRevisionsAndPaths) {
  EXPECT_EQ(urlEncode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(urlEncode("sub dir/file+1.json", true), "sub%20dir/file%2B1.json");
}
