"""``sam3-agent console``: an operator console in the browser, a separate process that is a ROS
client of a running node (docs/console.md).

- ``access.py``    pure: who may connect (loopback, the token, Host and Origin checks)
- ``commands.py``  pure: what a page may ask (goals, cancel, refinements, stop-follow,
                   ``concepts.prompts``), checked and bounded like the node's own inputs
- ``views.py``     pure: the node's messages -> the plain values the page shows
- ``panels.py``    pure: what each region shows, and when it stops being current
- ``health.py``    pure: the Health region, bounded (the newest per name, count, bytes, rate)
- ``hub.py``       pure: the newest state and images, fanned out to every open page
- ``ros_link.py``  the ROS side: its own rclpy context and executor in a thread of its own
- ``server.py``    the web side (aiohttp): the page, one WebSocket per tab
- ``page.py``      the page (HTML, CSS and JavaScript inline: no build step, nothing fetched)
- ``command.py``   the command line

Nothing here imports rclpy or aiohttp at module import: ``sam3-agent run`` and the node never
load them.
"""
