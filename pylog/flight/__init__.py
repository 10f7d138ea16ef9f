"""Arrow Flight on a broker (``pylog.flight.listeners``): topics served as Arrow streams."""

from pylog.flight.server import FlightNode, FlightService, start_flight
from pylog.flight.tickets import FlightTicket, ReadRequest, parse_read_request

__all__ = ["FlightNode", "FlightService", "FlightTicket", "ReadRequest", "parse_read_request", "start_flight"]
