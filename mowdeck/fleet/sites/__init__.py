"""Sites: a customer's property, a park or a pitch; its GeoJSON areas and its members."""
