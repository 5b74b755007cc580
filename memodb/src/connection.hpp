// Internal: one MemoDB client object = one NNG req0 socket, dialled in the background (NNG
// reconnects by itself), with one nng_ctx per request in flight and one per worker, so any
// number of requesters and workers share the socket (the protocol's multiplexing).
//
// Threads: NNG completes operations on its own threads. The completion callback only takes the
// result and the message off the aio and posts them to the client's strand; all state below is
// touched on the strand alone. Slots (an aio, a context) are kept until the connection is
// destroyed or, for retired workers, until nothing is pending on them, so a posted completion
// never outlives what it names; it finds its slot by key, and finds nothing once the connection
// has shut down. shutdown() closes the socket and waits for every aio, so nothing of NNG's runs
// after it.
#pragma once

#include <nng/nng.h>

#include <asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>
#include "polybus/adapter/reconnect.hpp"

#include "machine.hpp"
#include "nng_util.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/memodb/codec.hpp"

namespace polybus::memodb::detail {

struct ConnectionSettings {
  std::string nng_url;  // tcp://host:port, tcp://[v6]:port or ipc:///path
  std::chrono::milliseconds heartbeat_interval{10'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds queue_timeout{10'000};
  std::chrono::milliseconds job_timeout{0};  // 0: each request's remaining deadline
  std::uint32_t max_requests = 64;
  std::size_t max_message = 16 << 20;
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{30'000};
};

class Connection : public MessageBackend, public std::enable_shared_from_this<Connection> {
 public:
  Connection(const AdapterContext& context, ConnectionSettings settings);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Opens the socket and starts dialling. Throws polybus::Error if NNG refuses the address.
  void open();

  // Adapter work (strand).
  void request(RequestWork work);
  std::shared_ptr<AdapterSubscription> serve(const std::string& service, std::uint32_t workers,
                                             std::shared_ptr<SubscriptionSink> sink);
  void close(Clock::time_point deadline, std::function<void()> done);
  // Closes the socket and waits for every NNG operation to finish; idempotent.
  void shutdown();

  // serve() controls (strand).
  void unsubscribe(std::uint64_t serve, OpCompletion done);
  void set_paused(std::uint64_t serve, bool paused);
  void set_workers(std::uint64_t serve, std::uint32_t count);

  // MessageBackend (strand). Jobs take only reply(); the core refuses the others.
  void ack(polybus::detail::MessageState&) override {}
  void nack(polybus::detail::MessageState&, std::chrono::milliseconds) override {}
  void touch(polybus::detail::MessageState&) override {}
  void reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
             std::string detail) override;

 private:
  // Where NNG's callbacks post their completions: shut (the strand dropped) when the connection
  // shuts down, so a callback that runs later posts nothing.
  struct Gate {
    std::mutex mutex;
    std::optional<Strand> strand;
    // Contexts (ids) of workers whose RESULT is unanswered (WorkerSlot::result_unanswered says
    // why they matter); those that were when a pipe went, to be closed on the strand before a
    // new pipe is let in (the pipe callback refuses it until then); those so closed.
    std::set<std::uint32_t> unanswered_results;
    std::set<std::uint32_t> doomed_results;
    std::set<std::uint32_t> abandoned_results;
  };

  // An aio and the context it runs on. key, connection and gate never change after creation:
  // NNG's threads read them in the completion callback.
  struct Slot {
    Slot(std::uint64_t k, std::weak_ptr<Connection> s, std::shared_ptr<Gate> g)
        : key(k), connection(std::move(s)), gate(std::move(g)) {}
    virtual ~Slot();
    const std::uint64_t key;
    const std::weak_ptr<Connection> connection;
    const std::shared_ptr<Gate> gate;
    nng_aio* aio = nullptr;
    nng_ctx ctx = NNG_CTX_INITIALIZER;
    bool ctx_open = false;
    bool pending = false;  // an operation was started and its completion not yet handled
  };

  struct RequestSlot : Slot {
    using Slot::Slot;
    enum class Phase { idle, sending, receiving } phase = Phase::idle;
    OpCompletion done;
    std::string service;
  };

  struct WorkerSlot : Slot {
    using Slot::Slot;
    Worker machine{{}};         // memo01's worker exchange (machine.hpp)
    std::uint64_t serve = 0;
    bool retire = false;        // remove this worker once it is stopped
    std::uint32_t job_seq = 0;  // the job being handled, to match its reply
    // A RESULT went out and the broker's answer (the next JOB) has not come. If the connection
    // drops now, NNG would resend that RESULT on the next one; memo01's RESULT names only the
    // worker, so a broker that had taken it and handed the worker another job (whose JOB was
    // lost with the connection) would give the old result to the new job's requester.
    bool result_unanswered = false;
    // NNG's timed resend is off while a RESULT is unanswered (a resent RESULT is that danger
    // too); past the worker's resend time this timer gives the context up instead.
    std::unique_ptr<asio::steady_timer> answer_timer;
    // READY again after a DISCONNECT waits per the reconnect policy (a broker answering every
    // READY with DISCONNECT must not get thousands a second); a JOB or HEARTBEAT resets it.
    std::unique_ptr<Reconnector> reregister;
  };

  struct ServeRecord {
    std::string service;
    std::shared_ptr<SubscriptionSink> sink;
    std::uint32_t target = 1;
    bool paused = false;
    bool gone = false;  // unsubscribed: workers leave, the record goes with the last one
    bool confirmed = false;
    std::vector<std::uint64_t> workers;
  };

  struct Notifier {  // the pipe-event callback's argument
    std::weak_ptr<Connection> connection;
    std::shared_ptr<Gate> gate;
  };

  static void on_aio(void* arg);
  static void on_pipe(nng_pipe pipe, nng_pipe_ev event, void* arg);
  void completed(std::uint64_t key, int rv, MsgPtr msg);
  void pipe_event(nng_pipe_ev event);
  void set_result_unanswered(WorkerSlot& worker, bool unanswered);
  void close_doomed_results();
  void give_up_result(WorkerSlot& worker);
  std::chrono::milliseconds worker_resend_time() const;
  bool take_abandoned(WorkerSlot& worker);
  // connecting, once per attempt: the first dial, or a pipe NNG adds after a drop.
  void announce_attempt();
  // The longest NNG's dialer may now wait before its next attempt (StateEvent::retry_in).
  std::chrono::milliseconds next_dial_within();

  template <typename T>
  std::unique_ptr<T> make_slot();
  bool open_ctx(Slot& slot, std::chrono::milliseconds resend);

  // Requests.
  void start_request(RequestWork work);
  void request_completed(RequestSlot& slot, int rv, MsgPtr msg);
  void finish_request(RequestSlot& slot, std::error_code ec, std::string reply, std::string detail);
  void pump_requests();

  // Workers.
  WorkerSlot* add_worker(std::uint64_t serve_id, ServeRecord& serve);
  bool should_run(const WorkerSlot& worker) const;
  void start_worker(WorkerSlot& worker);
  void send_worker(WorkerSlot& worker, MsgPtr msg);
  void worker_completed(WorkerSlot& worker, int rv, MsgPtr msg);
  void on_job(WorkerSlot& worker, std::string_view service, std::string_view payload, MsgPtr msg);
  void restart_or_stop(WorkerSlot& worker);
  void stop_worker(WorkerSlot& worker);
  void cancel(Slot& slot);
  std::string describe(const WorkerSlot& worker) const;

  // While no pipe is up: NNG's dial failures become reconnecting events that name the cause.
  void watch_dial();
  void check_dial();

  void maybe_finish_close();
  void finish_close();

  AdapterContext ctx_;
  ConnectionSettings settings_;
  std::shared_ptr<Gate> gate_;
  std::unique_ptr<Notifier> notifier_;
  nng_socket socket_ = NNG_SOCKET_INITIALIZER;
  nng_dialer dialer_ = NNG_DIALER_INITIALIZER;
  DialFailures dial_failures_seen_;
  ReconnectLoop reconnect_;  // reports only: NNG's dialer makes the attempts
  asio::steady_timer dial_watch_timer_;
  bool dial_watched_ = false;
  bool socket_open_ = false;
  std::uint64_t next_key_ = 0;
  std::uint64_t next_serve_ = 0;
  int pipes_ = 0;
  bool attempt_announced_ = false;  // connecting was said for the attempt under way
  std::chrono::milliseconds dial_bound_{0};  // NNG's current reconnect bound (see next_dial_within)
  bool closing_ = false;        // no new work; workers leave
  bool close_pending_ = false;  // close() waits for the last exchanges, then shuts down
  bool dead_ = false;           // shut down: the socket is closed
  std::function<void()> close_done_;
  asio::steady_timer close_timer_;

  std::unordered_map<std::uint64_t, std::unique_ptr<RequestSlot>> requests_;
  std::vector<RequestSlot*> idle_requests_;
  std::size_t active_requests_ = 0;
  std::deque<RequestWork> waiting_;

  std::unordered_map<std::uint64_t, std::unique_ptr<WorkerSlot>> workers_;
  std::map<std::uint64_t, ServeRecord> serves_;
};

}  // namespace polybus::memodb::detail
