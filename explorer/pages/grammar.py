import streamlit as st

st.title("Grammar")
st.info("Coming soon.")
