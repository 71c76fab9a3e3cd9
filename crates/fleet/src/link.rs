//! How the fleet reaches its Redis (or Valkey): one server, a Redis Cluster, or the primary
//! a set of sentinels points at (`fleet.topology`).
//!
//! [`Store`] makes connections ([`Conn`]); every call of the fleet goes through one, whatever
//! the topology, and every script touches keys of one hash slot ([`super::keys`]).
//!
//! * `server`: a [`ConnectionManager`] to `fleet.redis` (it reconnects by itself).
//! * `cluster`: the `redis` crate's cluster connection, which learns the cluster from any of
//!   the listed nodes, routes each call to the primary of its slot and follows `MOVED`/`ASK`
//!   after a failover. Subscriptions (purges, slot notices) are made on any reachable node:
//!   Redis Cluster delivers a `PUBLISH` on any node to the subscribers of every node.
//! * `sentinel`: the sentinels are asked for the primary of `fleet.sentinel_service` (and the
//!   answer checked with `ROLE`) whenever a connection is made, so after a failover the next
//!   connection (made after the link was taken down: [`super::Fleet`]) goes to the new
//!   primary. The user, password and database of the first URL are used for the primary.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Client, Cmd, ConnectionAddr, Pipeline, RedisFuture, RedisResult, Value};

use super::section::{FleetSection, Topology};

/// A connection to the fleet's store, of any topology: what every call is given.
#[derive(Clone)]
pub enum Conn {
    /// One server (`server`, or the primary found through the sentinels).
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Where the store is, and how to connect to it.
pub(crate) enum Store {
    Server {
        client: Client,
        config: ConnectionManagerConfig,
    },
    Cluster {
        client: ClusterClient,
        /// Each listed node, for subscriptions.
        nodes: Vec<Client>,
    },
    Sentinel {
        sentinel: tokio::sync::Mutex<Sentinel>,
        service: String,
        node: SentinelNodeConnectionInfo,
        config: ConnectionManagerConfig,
    },
}

impl Store {
    /// The store of `section` (whose `fleet.redis` is set), each call bounded by `timeout`.
    /// Does not connect.
    pub(crate) fn new(section: &FleetSection, timeout: Duration) -> RedisResult<Store> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let clients: Vec<Client> = section.redis.all.iter().map(|(_, c)| c.clone()).collect();
        let Some(first) = clients.first().cloned() else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "fleet.redis is empty",
            )));
        };
        Ok(match section.topology {
            Topology::Server => Store::Server { client: first, config },
            Topology::Cluster => {
                let infos = clients.iter().map(|c| c.get_connection_info().clone());
                let client = ClusterClientBuilder::new(infos)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    // A call is bounded by fleet.timeout as a whole (`Fleet::attempt`); the
                    // client's own retries (after MOVED, a lost node) fit inside it.
                    .retries(2)
                    .min_retry_wait(10)
                    .max_retry_wait(100)
                    .build()?;
                Store::Cluster { client, nodes: clients }
            }
            Topology::Sentinel => {
                let info = first.get_connection_info();
                let mut node = SentinelNodeConnectionInfo::default()
                    .set_redis_connection_info(info.redis_settings().clone());
                if let ConnectionAddr::TcpTls { insecure, .. } = info.addr() {
                    node = node.set_tls_mode(if *insecure {
                        redis::TlsMode::Insecure
                    } else {
                        redis::TlsMode::Secure
                    });
                }
                let infos: Vec<_> =
                    clients.iter().map(|c| c.get_connection_info().clone()).collect();
                Store::Sentinel {
                    sentinel: tokio::sync::Mutex::new(Sentinel::build(infos)?),
                    service: section.sentinel_service.clone(),
                    node,
                    config,
                }
            }
        })
    }

    /// A new connection. For a server, made lazily (it connects on its first call); for a
    /// cluster, the cluster's slots are learnt now; for a sentinel set-up, the sentinels are
    /// asked where the primary is now.
    pub(crate) async fn connect(&self) -> RedisResult<Conn> {
        match self {
            Store::Server { client, config } => {
                ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
                    .map(Conn::Single)
            }
            Store::Cluster { client, .. } => client.get_async_connection().await.map(Conn::Cluster),
            Store::Sentinel { sentinel, service, node, config } => {
                let client = primary(sentinel, service, node).await?;
                ConnectionManager::new_lazy_with_config(client, config.clone()).map(Conn::Single)
            }
        }
    }

    /// A client to subscribe with: the server, the sentinels' current primary, or the first
    /// listed node of a cluster that answers.
    pub(crate) async fn subscriber(&self) -> RedisResult<redis::aio::PubSub> {
        match self {
            Store::Server { client, .. } => client.get_async_pubsub().await,
            Store::Sentinel { sentinel, service, node, .. } => {
                primary(sentinel, service, node).await?.get_async_pubsub().await
            }
            Store::Cluster { nodes, .. } => {
                let mut last = None;
                for node in nodes {
                    match node.get_async_pubsub().await {
                        Ok(pubsub) => return Ok(pubsub),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    redis::RedisError::from((redis::ErrorKind::Io, "no cluster node listed"))
                }))
            }
        }
    }
}

/// The client of the primary the sentinels name `service` now (checked with `ROLE`).
async fn primary(
    sentinel: &tokio::sync::Mutex<Sentinel>,
    service: &str,
    node: &SentinelNodeConnectionInfo,
) -> RedisResult<Client> {
    sentinel.lock().await.async_master_for(service, Some(node)).await
}
