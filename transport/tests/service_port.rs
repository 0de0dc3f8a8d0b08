//! The all-reduce service listens on TCP at the switch's own address (workers find it there):
//! the pair binds together, and a taken TCP port is either worked around (any free port was
//! asked for) or named in the error (a fixed port was).

// Only the session builder is used here.
#[allow(dead_code)]
mod support;

use std::net::{SocketAddr, TcpListener, TcpStream};

use switchgnn_transport::collective::ServiceConfig;
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::{ExchangeKind, ServerError, SwitchServer, Timeouts};

fn service() -> ServiceConfig {
    ServiceConfig::of(1, support::overload::WORKERS, &Timeouts::loopback())
}

#[test]
fn the_service_answers_on_the_switchs_port() {
    let (_, session) = support::overload::session(ExchangeKind::Host, 0.05);
    // Many pairs at once: each switch's port number is its service's.
    let mut running = Vec::new();
    for _ in 0..20 {
        let cfg = ServerConfig::loopback(1, support::overload::WORKERS, 1024);
        let (server, service) =
            SwitchServer::bind_with_service(cfg, session.clone(), service()).unwrap();
        let addr = server.local_addr().unwrap();
        TcpStream::connect(addr).expect("the service listens at the switch's address");
        running.push((server, service));
    }
}

#[test]
fn a_fixed_port_whose_tcp_twin_is_taken_is_named() {
    let (_, session) = support::overload::session(ExchangeKind::Host, 0.05);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let at: SocketAddr = taken.local_addr().unwrap();
    let cfg = ServerConfig {
        listen: at,
        ..ServerConfig::loopback(1, support::overload::WORKERS, 1024)
    };
    match SwitchServer::bind_with_service(cfg, session, service()) {
        Err(e @ ServerError::Service { addr, .. }) => {
            assert_eq!(addr, at);
            let text = e.to_string();
            assert!(text.contains(&at.to_string()), "{text}");
            assert!(text.contains("all-reduce service"), "{text}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("bound a TCP port that is taken"),
    }
}
