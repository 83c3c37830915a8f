#pragma once
// gizml::ai: serving language models with the OpenAI API (docs/serve.md). An HTTP/1.1 server of
// our own on POSIX sockets (a Listener; one epoll loop reads the requests of every connection, a
// thread answers each): GET /v1/models, POST /v1/chat/completions and POST /v1/completions,
// whole or streamed as Server-Sent Events. One scheduler thread per engine owns it: requests
// from the connections queue, join the engine's slots as they free up and decode together.
// POST /v1/images/generations and /v1/images/edits paint on image models (diffusion::ZImagePipeline,
// diffusion::KleinPipeline), one thread each. Chats show pictures to models with a vision tower.
#include <gizml/diffusion.h>
#include <gizml/llm.h>
#include <gizml/vision.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gizml::ai {

/// A model the server offers: the name requests give as "model", the model (tokenizer, chat
/// template) and the engine that runs its requests (its slots and context), and its vision tower
/// when it has one (chats may then show pictures: image_url parts; else they are refused with 400).
struct Served {
  std::string name;
  llm::Model model;
  llm::Engine engine;
  std::shared_ptr<const vision::Tower> tower = nullptr;
};

/// A served image model's pipeline: Z-Image Turbo (text to image) or klein (text to image and
/// edits). A variant, not an interface: both are value types already (copies share the weights),
/// what differs between them is one function (Painter's), and ServedPainter stays a plain struct.
using ImagePipeline = std::variant<diffusion::ZImagePipeline, diffusion::KleinPipeline>;

/// An image model the server offers on POST /v1/images/generations (and, klein, /v1/images/edits):
/// the name requests give as "model", its pipeline, and the largest side it paints (larger sizes
/// are refused with 400).
struct ServedPainter {
  std::string name;
  ImagePipeline pipeline;
  int64_t maxSide = 2048;
  /// BFL's prompt upsampler for requests that ask for it ("upsample": true); null: none, and such
  /// a request is a 400.
  std::shared_ptr<const diffusion::Upsampler> upsampler = nullptr;
};

/// Where a server takes its connections: a listening TCP socket, which the Listener owns (and
/// closes when destroyed).
class Listener {
 public:
  /// Binds host:port (port 0: an ephemeral one) and listens. Throws gizml::Error when the port is
  /// not in [0, 65535], the host does not resolve or the address cannot be bound.
  Listener(const std::string& host, int port);
  /// Takes a socket its caller bound and set listening (socket activation, e.g. systemd's fd 3;
  /// tests). Throws gizml::Error, leaving fd to the caller, when it is not a listening TCP socket.
  static Listener adopt(int fd);
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();

  int fd() const { return fd_; }
  /// The host given, or the bound address (numeric) of an adopted socket.
  const std::string& host() const { return host_; }
  /// The bound port (the ephemeral one when 0 was asked).
  int port() const { return port_; }

 private:
  Listener(int fd, std::string host);
  int fd_ = -1;
  std::string host_;
  int port_ = 0;
};

struct ServeOptions {
  std::string host = "127.0.0.1";       // Server(models, options) listens on host:port
  int port = 8080;                      // 0: an ephemeral port; Server::port() tells which
  size_t maxBody = 8 * 1024 * 1024;     // larger request bodies: 413
  int headTimeoutMs = 5000;             // a request's head must arrive within this of its first
                                        // byte, a new connection's first byte within this (408)
  int bodyTimeoutMs = 10000;            // each read of a body must bring bytes within this (408)
  int requestTimeoutMs = 30000;         // a request must arrive whole within this of its first byte;
                                        // a client that stops reading is dropped after this
  int idleTimeoutMs = 60000;            // idle keep-alive connections are closed after this
  int maxConnections = 4096;            // open at once; past it the longest idle keep-alive one
                                        // closes, else the new one gets 503 with Retry-After
  int maxPerClient = 256;               // open at once from one client address; likewise
  std::vector<std::string> corsOrigins; // CORS: origins allowed to read answers ("*": any)
  std::string apiKey;                   // not empty: routes but /health need "Authorization: Bearer KEY"
  bool thinking = false;                // enable_thinking for requests without reasoning_effort
  int64_t picturePixels = 1 << 20;      // a chat's pictures above this many pixels are scaled down
                                        // to it (image::decode) before the vision tower sees them
};

/// The OpenAI API on engines: the first is the default model (the first painter the default image
/// model). Serves from construction (the socket is listening when it returns) until stop() or
/// destruction.
class Server {
 public:
  /// Takes connections on listener (options.host and port are not read). Throws gizml::Error
  /// when there is no model, two share a name, a tower's rows are not its model's width, or
  /// options.picturePixels is below 1.
  Server(std::vector<Served> models, std::vector<ServedPainter> painters, Listener listener, ServeOptions options = {});
  Server(std::vector<Served> models, Listener listener, ServeOptions options = {});
  /// On Listener(options.host, options.port): throws gizml::Error too when it cannot be bound.
  Server(std::vector<Served> models, ServeOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The bound port (the ephemeral one when options.port was 0).
  int port() const;
  /// "http://HOST:PORT".
  std::string url() const;
  /// Stops accepting, cancels the running requests, closes the connections and joins every thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The spec's serve: engines served on listener, from now until the server's stop() or end. A
/// program embeds it so: auto server = serve(std::move(engines), Listener("127.0.0.1", 8080));
Server serve(std::vector<Served> engines, Listener listener, ServeOptions options = {});
/// The same with image models beside them.
Server serve(std::vector<Served> engines, std::vector<ServedPainter> painters, Listener listener, ServeOptions options = {});

using llm::ToolCall;

/// A model's answer split as the OpenAI API returns it: reasoning (<think>...</think>), content,
/// and the calls llm::toolCalls reads (tools, the request's OpenAI tool list, types the
/// parameters of Qwen's function form). inReasoning: the prompt opened a <think>.
struct Answer {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};
Answer parseAnswer(std::string_view text, const nlohmann::ordered_json& tools = nlohmann::ordered_json::array(),
                   bool inReasoning = false);

}  // namespace gizml::ai
